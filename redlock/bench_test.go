package redlock_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redlock"
)

// BenchmarkTryLockUnlock: one uncontended TryLock and Unlock of one key on the five
// nodes per op.
func BenchmarkTryLockUnlock(b *testing.B) {
	l := newLocker(b, nil)
	ctx := context.Background()
	key := "bench-uncontended-" + distlock.NewToken()[:8]
	for b.Loop() {
		lease, err := l.TryLock(ctx, key, 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx, lease); err != nil {
			b.Fatal(err)
		}
	}
}

// holdFor is how long a holder keeps the key in the hand-off benchmark: long enough
// that a holder that has just released and queues again finds the key held, so each
// hand-off goes to a waiter that was already waiting.
const holdFor = 2 * time.Millisecond

// BenchmarkHandoff: 16 waiters, each with a Locker (and clients) of its own as if in
// another process, take one key in turn with distlock.Lock (which waits through
// pub/sub), holding it for holdFor. One op is one hand-off (its ns/op includes
// holdFor); gap-p50/gap-p99 measure the time from the holder's Unlock call to the
// next holder's acquisition.
func BenchmarkHandoff(b *testing.B) {
	const waiters = 16
	lockers := make([]*redlock.Locker, waiters)
	for i := range lockers {
		lockers[i] = newLocker(b, nil)
	}
	key := "bench-handoff-" + distlock.NewToken()[:8]
	gaps := handoff(b, waiters, func(ctx context.Context, i int) (func(context.Context) error, error) {
		lease, err := distlock.Lock(ctx, lockers[i], key, 10*time.Second, nil)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error { return lockers[i].Unlock(ctx, lease) }, nil
	})
	reportGaps(b, gaps)
}

// handoff runs b.N hand-offs of one lock among waiters goroutines, each holding it
// for holdFor and queueing again once another has taken it; lock(ctx, i) is
// waiter i's blocking acquisition and returns its release. It returns the gaps.
func handoff(b *testing.B, waiters int, lock func(ctx context.Context, i int) (func(context.Context) error, error)) []time.Duration {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu       sync.Mutex
		released time.Time     // when the last holder called its release
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

// reportGaps reports the median and 99th percentile of gaps, in milliseconds.
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
