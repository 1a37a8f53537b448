package redlock_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
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
	if err != nil {
		t.Fatalf("redlock.New: %v", err)
	}
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
// persistence would: it kills the node (if running), deletes everything in its
// directory but its log, and restarts it.
func restartEmpty(t *testing.T, i int) {
	t.Helper()
	s := nodes[i]
	s.Kill(t)
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		t.Fatalf("read %s: %v", s.Dir, err)
	}
	for _, e := range entries {
		p := filepath.Join(s.Dir, e.Name())
		if p == s.Logs() {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			t.Fatalf("wipe %s: %v", p, err)
		}
	}
	if entries, _ := os.ReadDir(s.Dir); len(entries) > 1 {
		t.Fatalf("%s: %d entries left in its directory after wiping it", s, len(entries))
	}
	s.Restart(t)
}

// rawExists reports whether node i holds the Redis key name.
func rawExists(ctx context.Context, i int, name string) (bool, error) {
	v, err := testenv.RedisCommand(ctx, nodes[i].Addr(), "EXISTS", name)
	return v == int64(1), err
}

// eventually polls cond every 10ms until it is true or d passes.
func eventually(t *testing.T, d time.Duration, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-t.Context().Done():
			return false
		}
	}
	return true
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
