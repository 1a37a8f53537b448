package redlockvsredsync

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	goredsync "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/redlock"
)

const (
	ttl     = 10 * time.Second
	waiters = 16
	// holdFor is how long a holder keeps the key in the hand-off benchmark: long
	// enough that a holder that has just released and queues again finds the key
	// held, so each hand-off goes to a waiter that was already waiting.
	holdFor = 2 * time.Millisecond
)

var nodes []*testenv.Server

func TestMain(m *testing.M) {
	testenv.Main(m, func(env *testenv.Env) error {
		var err error
		nodes, err = env.RedisNodes(5)
		return err
	})
}

// clients returns one go-redis client per node, closed when b ends.
func clients(b *testing.B) []redis.UniversalClient {
	cs := make([]redis.UniversalClient, len(nodes))
	for i, s := range nodes {
		c := redis.NewClient(&redis.Options{Addr: s.Addr()})
		b.Cleanup(func() { _ = c.Close() })
		cs[i] = c
	}
	return cs
}

func newRedlock(b *testing.B) *redlock.Locker {
	l, err := redlock.New(clients(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return l
}

func newRedsync(b *testing.B) *redsync.Redsync {
	var pools []redsyncredis.Pool
	for _, c := range clients(b) {
		pools = append(pools, goredsync.NewPool(c))
	}
	return redsync.New(pools...)
}

func BenchmarkUncontended(b *testing.B) {
	ctx := context.Background()
	b.Run("redlock", func(b *testing.B) {
		l := newRedlock(b)
		key := "uncontended-redlock-" + distlock.NewToken()[:8]
		for b.Loop() {
			lease, err := l.TryLock(ctx, key, ttl)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(ctx, lease); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("redsync", func(b *testing.B) {
		rs := newRedsync(b)
		key := "uncontended-redsync-" + distlock.NewToken()[:8]
		for b.Loop() {
			m := rs.NewMutex(key, redsync.WithExpiry(ttl), redsync.WithTries(1))
			if err := m.TryLockContext(ctx); err != nil {
				b.Fatal(err)
			}
			if ok, err := m.UnlockContext(ctx); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
}

func BenchmarkHandoff(b *testing.B) {
	b.Run("redlock", func(b *testing.B) {
		key := "handoff-redlock-" + distlock.NewToken()[:8]
		lockers := make([]*redlock.Locker, waiters)
		for i := range lockers {
			lockers[i] = newRedlock(b) // each waiter as if in a process of its own
		}
		reportGaps(b, handoff(b, func(ctx context.Context, i int) (func(context.Context) error, error) {
			lease, err := distlock.Lock(ctx, lockers[i], key, ttl, nil)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context) error { return lockers[i].Unlock(ctx, lease) }, nil
		}))
	})
	b.Run("redsync", func(b *testing.B) {
		key := "handoff-redsync-" + distlock.NewToken()[:8]
		rss := make([]*redsync.Redsync, waiters)
		for i := range rss {
			rss[i] = newRedsync(b)
		}
		reportGaps(b, handoff(b, func(ctx context.Context, i int) (func(context.Context) error, error) {
			// Default retry delay (random 50-250ms); enough tries to outwait 15
			// others, bounded by ctx.
			m := rss[i].NewMutex(key, redsync.WithExpiry(ttl), redsync.WithTries(1<<20))
			if err := m.LockContext(ctx); err != nil {
				return nil, err
			}
			return func(ctx context.Context) error {
				_, err := m.UnlockContext(ctx)
				return err
			}, nil
		}))
	})
}

// handoff runs b.N hand-offs of one lock among the waiters, each holding it for
// holdFor and queueing again once another has taken it: lock(ctx, i) is waiter i's
// blocking acquisition and returns its release. One op is one hand-off (its ns/op
// includes holdFor). It
// returns the gaps between a holder's call of its release and the next acquisition.
func handoff(b *testing.B, lock func(ctx context.Context, i int) (func(context.Context) error, error)) []time.Duration {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu       sync.Mutex
		released time.Time
		handed   chan struct{} // closed when the next holder acquires
		gaps     = make([]time.Duration, 0, b.N)
		count    atomic.Int64
		wg       sync.WaitGroup
		failed   atomic.Value
	)
	n := int64(b.N)
	b.ResetTimer()
	for i := range waiters {
		wg.Go(func() {
			for ctx.Err() == nil {
				release, err := lock(ctx, i)
				if err != nil {
					if ctx.Err() == nil {
						failed.Store(err)
						cancel()
					}
					return
				}
				now := time.Now()
				c := count.Add(1)
				mu.Lock()
				if handed != nil {
					close(handed)
				}
				if !released.IsZero() {
					gaps = append(gaps, now.Sub(released))
				}
				next := make(chan struct{})
				handed = next
				mu.Unlock()
				if c >= n {
					cancel()
				}
				time.Sleep(holdFor) // the work under the lock
				mu.Lock()
				released = time.Now()
				mu.Unlock()
				if err := release(context.Background()); err != nil {
					failed.Store(err)
					cancel()
					return
				}
				// A hand-off goes to one of the others: wait for the next holder
				// before queueing again.
				select {
				case <-next:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
	return gaps
}

// reportGaps reports the median and 99th percentile of the gaps, in milliseconds.
func reportGaps(b *testing.B, gaps []time.Duration) {
	if len(gaps) == 0 {
		return
	}
	slices.Sort(gaps)
	q := func(p float64) float64 {
		return float64(gaps[int(p*float64(len(gaps)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(0.5), "gap-p50-ms")
	b.ReportMetric(q(0.99), "gap-p99-ms")
}
