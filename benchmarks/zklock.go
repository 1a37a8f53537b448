package benchmarks

import (
	"context"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/zklock"
)

// newZKLockClient returns a zklock.Locker on its own ZooKeeper session, whose
// timeout is cfg.TTL (testenv's servers grant it: it lies between their minimum
// and maximum session timeouts).
func newZKLockClient(ctx context.Context, addr string, route Route, cfg Config) (Client, error) {
	a, err := route.Dial(addr)
	if err != nil {
		return nil, err
	}
	sess, err := zklock.Connect(ctx, []string{a}, cfg.TTL, &zklock.ConnectOptions{
		ZK: []func(*zk.Conn){zk.WithLogger(zkNopLogger{}), zk.WithLogInfo(false)},
	})
	if err != nil {
		return nil, err
	}
	// The servers' real tick, as zklock's doc advises: the default (half the
	// session timeout) caps a lease at 5/12 of it, and W5's 10,000 leases then
	// need a renewal answered within 0.83 s.
	// WaitContends: distlock.Lock follows every Wait with a TryLock at once.
	l, err := zklock.New(sess, &zklock.Options{TickTime: testenv.ZooKeeperTickTime, WaitContends: true})
	if err != nil {
		sess.Close()
		return nil, err
	}
	return &lockerClient{l: l, ttl: cfg.TTL, close: func() error {
		// The session first: W3 cut the holder's connection, and Close would
		// otherwise wait up to the session timeout to delete its nodes, which
		// closing the session (or its expiry) deletes anyway.
		sess.Close()
		return l.Close()
	}}, nil
}
