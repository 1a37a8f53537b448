package benchmarks

import (
	"github.com/distlock/distlock/zklock"
)

// newZKLockClient returns a zklock.Locker on its own ZooKeeper session, whose
// timeout is cfg.TTL (testenv's servers grant it: it lies between their minimum
// and maximum session timeouts).
func newZKLockClient(addr string, route Route, cfg Config) (Client, error) {
	conn, err := newZKConn(addr, route, cfg.TTL)
	if err != nil {
		return nil, err
	}
	l, err := zklock.New(conn, &zklock.Options{SessionTimeout: cfg.TTL})
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &lockerClient{l: l, ttl: cfg.TTL, close: func() error {
		conn.Close() // first, so that Close does not wait for requests in flight
		return l.Close()
	}}, nil
}
