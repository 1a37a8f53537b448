package benchmarks

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/redlock"
)

// RedLockSubjects returns the subjects on independent Redis masters (addrs, five):
// redlock, the peer redsync over all of them, and the floor.
func RedLockSubjects(addrs []string, cfg Config) []Subject {
	return []Subject{
		{
			Name: "redlock", Protocol: "redlock", Role: Ours,
			Wakeup: "pub/sub on every master (Waiter)", Waiter: true, Workloads: ours,
			Bound: cfg.TTL, BoundKind: "ttl", Networked: true, Requests: redisCounter(addrs...),
			New: func(ctx context.Context, route Route) (Client, error) {
				return newRedLockClient(addrs, route, cfg)
			},
		},
		{
			Name: "redsync (5 masters)", Protocol: "redlock", Role: Peer,
			Wakeup: "poll, random 50-250ms (default)", Workloads: all,
			Bound: cfg.TTL, BoundKind: "ttl", Networked: true,
			New: func(ctx context.Context, route Route) (Client, error) {
				return newRedsyncClient(addrs, route, cfg.TTL)
			},
			Note: "go-redsync/redsync v4 over the same masters: the RedLock algorithm, no fence",
		},
		{
			Name: "redlock raw floor", Baseline: true, Protocol: "redlock", Role: Floor,
			Wakeup: "-", Workloads: w1Only, Networked: true,
			New: func(ctx context.Context, route Route) (Client, error) {
				return newRawRedis(addrs, route, cfg.TTL)
			},
			Note: "SET NX PX on every master in parallel, then a compare-and-delete on every master: 2 parallel round trips, quorum 3 of 5, no fence",
		},
		{
			Name: "redlock raw floor + fence", Protocol: "redlock", Role: Floor,
			Wakeup: "-", Workloads: w1Only, Networked: true,
			New: func(ctx context.Context, route Route) (Client, error) {
				return newFencedRedis(addrs, route, cfg.TTL)
			},
			Note: "what a fenced RedLock with release messages needs at least: " + fencedFloorNote(len(addrs)) + " (no fence raise on lagging masters, no restart detection)",
		},
	}
}

// newRedLockClient returns a redlock.Locker over one go-redis client per master.
func newRedLockClient(addrs []string, route Route, cfg Config) (Client, error) {
	var clients []redis.UniversalClient
	closeAll := func() error {
		var errs []error
		for _, c := range clients {
			errs = append(errs, c.Close())
		}
		return errors.Join(errs...)
	}
	for _, a := range addrs {
		c, err := newRedisClient(a, route)
		if err != nil {
			_ = closeAll()
			return nil, err
		}
		clients = append(clients, c)
	}
	l, err := redlock.New(clients, nil)
	if err != nil {
		_ = closeAll()
		return nil, err
	}
	return &lockerClient{l: l, ttl: cfg.TTL, close: closeBoth(l.Close, closeAll)}, nil
}
