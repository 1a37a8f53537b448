package redlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/redlock"
)

// clients returns one new go-redis client per address, closed at t's cleanup.
func clients(t testing.TB, addrs []string) []redis.UniversalClient {
	t.Helper()
	cs := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		t.Cleanup(func() { _ = c.Close() })
		cs[i] = c
	}
	return cs
}

func nodeAddrs() []string {
	addrs := make([]string, len(nodes))
	for i, s := range nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// newLocker returns a Locker over the five nodes with clients of its own.
func newLocker(t testing.TB, opts *redlock.Options) *redlock.Locker {
	t.Helper()
	l, err := redlock.New(clients(t, nodeAddrs()), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() }) // before the clients close
	return l
}

// down kills the nodes with the given indexes, as a crash would, and brings every
// one of them back (with its data) when t ends, unless the test restarted it.
func down(t *testing.T, idx ...int) {
	t.Helper()
	for _, i := range idx {
		s := nodes[i]
		s.Kill(t)
		t.Cleanup(func() {
			if !s.Running() {
				s.Restart(t)
			}
		})
	}
}

// restartEmpty starts node i again with no data, as a crashed Redis without
// persistence would (testenv's Server.RestartEmpty).
func restartEmpty(t *testing.T, i int) {
	t.Helper()
	nodes[i].RestartEmpty(t)
}

// counting waits until every node counts towards l's quorums again (a node that
// came back empty is kept out for MaxTTL, then given an era): until a lock of l
// holds on all of them. It fails t after d. It may run in t's cleanup.
func counting(t *testing.T, l *redlock.Locker, d time.Duration) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context()) // not cancelled in t's cleanup
	key := "counting-" + driver.NewToken()[:8]
	require.Eventually(t, func() bool {
		lease, err := l.TryLock(ctx, key, time.Second)
		if err != nil {
			return false
		}
		defer func() { _ = l.Unlock(ctx, lease) }()
		for i := range nodes {
			if held, err := rawExists(ctx, i, lockName(key)); err != nil || !held {
				return false
			}
		}
		return true
	}, d, 10*time.Millisecond, "the nodes do not all count again within %v", d)
}

// rawExists reports whether node i holds the Redis key name.
func rawExists(ctx context.Context, i int, name string) (bool, error) {
	v, err := testenv.RedisCommand(ctx, nodes[i].Addr(), "EXISTS", name)
	return v == int64(1), err
}

// lockName returns the Redis name of key's lock on every node, for a Locker with the
// default prefix.
func lockName(key string) string {
	n, _, _ := redlock.Names(redlock.DefaultPrefix, key)
	return n
}

// acquire retries TryLock until it succeeds, waiting through Wait between attempts;
// errors other than ErrLocked are returned.
func acquire(ctx context.Context, l *redlock.Locker, key string, ttl time.Duration) (distlock.Lease, time.Time, time.Time, error) {
	for {
		start := time.Now()
		lease, err := l.TryLock(ctx, key, ttl)
		if err == nil || !errors.Is(err, distlock.ErrLocked) {
			return lease, start, time.Now(), err
		}
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		_ = l.Wait(wctx, key)
		cancel()
		if ctx.Err() != nil {
			return lease, start, time.Now(), errors.Join(err, ctx.Err())
		}
	}
}

// herdRounds runs perLocker callers of distlock.Lock on key through each of ls
// (each holds the key for hold once it has it) while holder holds key with first;
// once every caller waits it releases first, waits until every caller has taken
// and released the key, and returns the attempts (phase-1 rounds) per handoff.
func herdRounds(ctx context.Context, t *testing.T, holder *redlock.Locker, first distlock.Lease, ls []*redlock.Locker, perLocker int, hold time.Duration) float64 {
	t.Helper()
	var (
		counts   []func() int64
		acquired atomic.Int64
		wg       sync.WaitGroup
	)
	for _, l := range ls {
		counts = append(counts, l.CountAcquires())
		for range perLocker {
			wg.Go(func() {
				lease, err := distlock.Lock(ctx, l, first.Key, 30*time.Second, nil)
				if err != nil {
					t.Errorf("Lock: %v", err)
					return
				}
				acquired.Add(1)
				time.Sleep(hold) // the critical section, not a synchronisation
				if err := l.Unlock(ctx, lease); err != nil {
					t.Errorf("Unlock: %v", err)
				}
			})
		}
	}
	rounds := func() (n int64) {
		for _, c := range counts {
			n += c()
		}
		return n
	}
	total := len(ls) * perLocker
	require.Eventually(t, func() bool {
		n := 0
		for _, l := range ls {
			n += l.Waiting(first.Key)
		}
		return n == total
	}, 30*time.Second, time.Millisecond, "every caller waits")
	before := rounds()
	require.NoError(t, holder.Unlock(ctx, first))
	wg.Wait()
	require.Equal(t, int64(total), acquired.Load())
	return float64(rounds()-before) / float64(total)
}
