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
// [minSessionTimeout, maxSessionTimeout] (by default 4s to 40s). A ZooKeeper lock
// lives as long as its session, and a lease is certainly held for at most
// zkLeaseCap of the granted timeout, so the lease ttl is capped at that.
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
	// go-zookeeper logs every failed dial and reconnection; distlock reports the
	// errors that result.
	sess, err := zklock.Connect(ctx, servers, o.ttl, &zklock.ConnectOptions{
		ZK: []func(*zk.Conn){zk.WithLogger(zkQuiet{}), zk.WithLogInfo(false)},
	})
	if err != nil {
		return nil, err
	}
	l, err := zklock.New(sess, &zklock.Options{Prefix: root, Owner: o.owner})
	if err != nil {
		sess.Close()
		return nil, err
	}
	granted := sess.Timeout()
	return &backend{
		locker:    l,
		maxTTL:    zkLeaseCap(granted),
		maxTTLWhy: fmt.Sprintf("5/12 of the session timeout %v that ZooKeeper granted", granted),
		close: func() {
			// The session first: closing it deletes every node of the session on
			// the server at once, and Locker.Close then returns at once; the other
			// order waits up to the session timeout when the connection is down.
			sess.Close()
			l.Close()
		},
	}, nil
}

// zkLeaseCap is the longest validity of a zklock lease on a session of the
// granted timeout s with the default Options.TickTime of s/2: the package's
// s - s/3 - TickTime/2, which is 5/12 of s.
func zkLeaseCap(s time.Duration) time.Duration {
	return s - s/3 - (s/2)/2
}

// zkQuiet is a zk.Logger that drops everything.
type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}
