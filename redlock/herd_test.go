package redlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redlock"
)

// TestNoHerd: waiters on one key across 4 Lockers take it one after another, and a
// release costs each Locker with waiters about one attempt, not one per waiter.
func TestNoHerd(t *testing.T) {
	const lockers, perLocker = 4, 40
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := "herd-" + distlock.NewToken()[:8]
	// Generous node timeouts: the machine may be loaded, and timeouts are not what
	// this test is about.
	opts := &redlock.Options{NodeTimeout: 2 * time.Second}
	holder := newLocker(t, opts)
	first, err := holder.TryLock(ctx, key, 30*time.Second)
	require.NoError(t, err)

	var (
		ls       []*redlock.Locker
		counts   []func() int64
		acquired atomic.Int64
		wg       sync.WaitGroup
	)
	for range lockers {
		l := newLocker(t, opts)
		ls = append(ls, l)
		counts = append(counts, l.CountAcquires())
		for range perLocker {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lease, err := distlock.Lock(ctx, l, key, 30*time.Second, nil)
				if err != nil {
					t.Errorf("Lock: %v", err)
					return
				}
				acquired.Add(1)
				if err := l.Unlock(ctx, lease); err != nil {
					t.Errorf("Unlock: %v", err)
				}
			}()
		}
	}
	tries := func() (n int64) {
		for _, c := range counts {
			n += c()
		}
		return n
	}
	require.Eventually(t, func() bool {
		n := 0
		for _, l := range ls {
			n += l.Waiting(key)
		}
		return n == lockers*perLocker
	}, 30*time.Second, 10*time.Millisecond, "every caller waits")
	before := tries()
	require.NoError(t, holder.Unlock(ctx, first))
	wg.Wait()
	total := int64(lockers * perLocker)
	require.Equal(t, total, acquired.Load())
	per := float64(tries()-before) / float64(total)
	t.Logf("%d handoffs, %.2f attempts per handoff", total, per)
	// About one attempt per Locker with waiters and release (each woken loser waits
	// again, and may find the key free when its read comes after the next release),
	// plus split votes: bounded by the Lockers, not by the waiters (40 per Locker).
	require.LessOrEqual(t, per, float64(3*lockers))
}
