package main

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/distlock/distlock/etcdlock"
)

// openEtcd opens an etcd:// URL (see etcdClient).
func openEtcd(ctx context.Context, u *backendURL, o openOptions) (*backend, error) {
	client, err := etcdClient(ctx, u)
	if err != nil {
		return nil, err
	}
	opts := &etcdlock.Options{Owner: o.owner}
	if p := u.path; p != "" && p != "/" {
		opts.Prefix = p[1:]
	}
	l, err := etcdlock.New(client, opts)
	if err != nil {
		client.Close()
		return nil, err
	}
	return &backend{locker: l, close: closeLocker(l.Close, func() { client.Close() })}, nil
}

// etcdClient connects to etcd://[user:password@]h1:p1,h2:p2[/prefix][?TLS
// parameters] (port 2379 by default). It first dials the endpoints itself, so
// that when none listens the error says so at once ("connection refused"), where
// the client would retry in the background until ctx ends.
func etcdClient(ctx context.Context, u *backendURL) (*clientv3.Client, error) {
	eps, err := u.hostsWithPort("2379")
	if err != nil {
		return nil, err
	}
	tlsCfg, err := takeTLS(u, false)
	if err != nil {
		return nil, err
	}
	if err := u.noQuery(); err != nil {
		return nil, err
	}
	if err := reachAny(ctx, "etcd", eps, tlsCfg); err != nil {
		return nil, err
	}
	cfg := clientv3.Config{
		Endpoints:   eps,
		DialTimeout: 5 * time.Second,
		// Keepalive pings notice a member that stopped answering (paused, cut
		// off) within DialKeepAliveTime+DialKeepAliveTimeout, and the client moves
		// to another one; without them a release with the leader paused takes
		// about 4s.
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: time.Second,
		Logger:               zap.NewNop(),
		TLS:                  tlsCfg,
	}
	if u.user != nil {
		cfg.Username = u.user.Username()
		cfg.Password, _ = u.user.Password()
	}
	client, err := clientv3.New(cfg)
	if err != nil {
		return nil, redactErr("etcd "+hostsOf(u), err, u)
	}
	return client, nil
}
