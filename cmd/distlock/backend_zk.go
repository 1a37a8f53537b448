package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/zklock"
)

// openZooKeeper opens zk://h1:p1,h2:p2[/root] (port 2181 by default). The session
// timeout it asks for is the --ttl; ZooKeeper clamps it to the server's
// [minSessionTimeout, maxSessionTimeout] (by default 4s to 40s), and the lease ttl is
// then capped at the granted timeout, since a ZooKeeper lock lives as long as its
// session.
func openZooKeeper(ctx context.Context, u *backendURL, o openOptions) (*backend, error) {
	servers, err := u.hostsWithPort("2181")
	if err != nil {
		return nil, err
	}
	if err := u.noQuery(); err != nil {
		return nil, err
	}
	if u.user != nil {
		return nil, badURL(u, "ZooKeeper takes no user or password in the URL")
	}
	root := ""
	if p := strings.TrimSuffix(u.path, "/"); p != "" {
		root = p
	}
	lg := &zkSessionLogger{granted: make(chan time.Duration, 1)}
	conn, _, err := zk.Connect(servers, o.ttl, zk.WithLogger(lg))
	if err != nil {
		return nil, fmt.Errorf("zookeeper %v: %w", servers, err)
	}
	var granted time.Duration
	select {
	case granted = <-lg.granted:
	case <-ctx.Done():
		conn.Close()
		return nil, fmt.Errorf("zookeeper %v: no session: %w", servers, ctx.Err())
	}
	l, err := zklock.New(conn, &zklock.Options{SessionTimeout: granted, Root: root, Owner: o.owner})
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &backend{
		locker: l,
		maxTTL: granted,
		close: func() {
			conn.Close() // ends the session first, so Close returns at once
			l.Close()
		},
	}, nil
}

// zkSessionLogger learns the session timeout that the server granted, which a
// *zk.Conn reports only in its log line "authenticated: id=..., timeout=...", and
// drops the rest of go-zookeeper's log (distlock reports the errors that result).
type zkSessionLogger struct {
	granted chan time.Duration
}

func (z *zkSessionLogger) Printf(format string, args ...any) {
	if !strings.HasPrefix(format, "authenticated:") || len(args) != 2 {
		return
	}
	var ms int64
	switch v := args[1].(type) {
	case int32:
		ms = int64(v)
	case int64:
		ms = v
	case int:
		ms = int64(v)
	default:
		return
	}
	if ms <= 0 {
		return
	}
	select {
	case z.granted <- time.Duration(ms) * time.Millisecond:
	default: // a later session of the same connection
	}
}
