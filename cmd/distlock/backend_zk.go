package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/zklock"
)

// openZooKeeper opens zk://h1:p1,h2:p2[/root][?TLS parameters] (port 2181 by
// default). The session timeout it asks for is the --ttl; ZooKeeper clamps it to
// the server's [minSessionTimeout, maxSessionTimeout] (by default 4s to 40s). A
// ZooKeeper lock lives as long as its session, and a lease is certainly held for
// at most zkLeaseCap of the granted timeout, so the lease ttl is capped at that.
func openZooKeeper(ctx context.Context, u *backendURL, o openOptions) (*backend, error) {
	t, err := zkTargetOf(u)
	if err != nil {
		return nil, err
	}
	sess, err := t.connect(ctx, o.ttl)
	if err != nil {
		return nil, err
	}
	root := ""
	if p := strings.TrimSuffix(u.path, "/"); p != "" {
		root = p
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

// A zkTarget is the ZooKeeper servers of a zk:// URL, and how to reach them.
type zkTarget struct {
	servers []string
	tls     *tls.Config // nil: plain TCP
}

// zkTargetOf checks a zk:// URL and returns its servers (port 2181 by default)
// and TLS configuration.
func zkTargetOf(u *backendURL) (zkTarget, error) {
	servers, err := u.hostsWithPort("2181")
	if err != nil {
		return zkTarget{}, err
	}
	tlsCfg, err := takeTLS(u, false)
	if err != nil {
		return zkTarget{}, err
	}
	if err := u.noQuery(); err != nil {
		return zkTarget{}, err
	}
	if u.user != nil {
		return zkTarget{}, badURL(u, "ZooKeeper takes no user or password in the URL")
	}
	return zkTarget{servers: servers, tls: tlsCfg}, nil
}

// connect opens a session, asking for a session timeout of timeout. It first
// dials the servers itself, so that when none listens the error says so at once
// ("connection refused"): go-zookeeper retries unreachable servers until ctx ends.
func (t zkTarget) connect(ctx context.Context, timeout time.Duration) (*zklock.Session, error) {
	servers, tlsCfg := t.servers, t.tls
	if err := reachAny(ctx, "zk", servers, tlsCfg); err != nil {
		return nil, err
	}
	// go-zookeeper logs every failed dial and reconnection, and retries until ctx
	// ends; distlock notes the last dial error, to say why when ctx ends, and
	// gives up at once on a certificate that does not verify.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var lastErr error
	dial := func(network, address string, timeout time.Duration) (net.Conn, error) {
		d := &net.Dialer{Timeout: timeout}
		var c net.Conn
		var err error
		if tlsCfg != nil {
			c, err = tls.DialWithDialer(d, network, address, tlsCfg)
		} else {
			c, err = d.Dial(network, address)
		}
		if err != nil {
			mu.Lock()
			lastErr = err
			mu.Unlock()
			if isTLSRefusal(err) {
				cancel()
			}
		}
		return c, err
	}
	opts := &zklock.ConnectOptions{Dialer: dial, ZK: []func(*zk.Conn){zk.WithLogger(zkQuiet{}), zk.WithLogInfo(false)}}
	sess, err := zklock.Connect(ctx, servers, timeout, opts)
	if err != nil {
		mu.Lock()
		defer mu.Unlock()
		if lastErr != nil {
			return nil, fmt.Errorf("%w (last dial: %w)", err, lastErr)
		}
		return nil, err
	}
	return sess, nil
}

// zkLeaseCap is the longest validity of a zklock lease on a session of the
// granted timeout s with the default Options.TickTime of s/2: the package's
// s - s/3 - TickTime/2, which is 5/12 of s.
func zkLeaseCap(s time.Duration) time.Duration {
	return s - s/3 - (s/2)/2
}
