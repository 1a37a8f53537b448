package sqltest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/sqllock/sqldialect"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/stretchr/testify/require"
)

// A Counting is a Dialect that counts the calls that send statements.
type Counting struct {
	sqldialect.Dialect
	N atomic.Int64
}

func (c *Counting) Acquire(ctx context.Context, r sqldialect.Row, ttl time.Duration) (int64, bool, sqldialect.Session, error) {
	c.N.Add(1)
	return c.Dialect.Acquire(ctx, r, ttl)
}

func (c *Counting) Renew(ctx context.Context, r sqldialect.Row, ttl time.Duration) (bool, error) {
	c.N.Add(1)
	return c.Dialect.Renew(ctx, r, ttl)
}

func (c *Counting) Release(ctx context.Context, r sqldialect.Row) (bool, error) {
	c.N.Add(1)
	return c.Dialect.Release(ctx, r)
}

func (c *Counting) Inspect(ctx context.Context, r sqldialect.Row) (sqldialect.RowState, bool, error) {
	c.N.Add(1)
	return c.Dialect.Inspect(ctx, r)
}

// NoHerd runs waiters goroutines over the Lockers ls, all in distlock.Lock on one
// key held by ls[0] (each takes the key and releases it at once), and returns the
// dialect calls per handoff that count reports. Each Locker's Waits poll the key
// with a poller of their own, so a handoff costs a few reads and one TryLock per
// Locker, not one TryLock per waiter.
func NoHerd(t *testing.T, ls []distlock.Locker, waiters int, count func() int64) float64 {
	t.Helper()
	key := "herd-" + driver.NewToken()
	first, err := ls[0].TryLock(OpCtx(t), key, time.Minute)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	opts := &distlock.LockOptions{MaxWait: time.Minute} // no wake-up but the Waits'
	var wg sync.WaitGroup
	var started atomic.Int64
	errs := make(chan error, waiters)
	for i := range waiters {
		wg.Go(func() {
			l := ls[i%len(ls)]
			started.Add(1)
			lease, err := distlock.Lock(ctx, l, key, time.Minute, opts)
			if err != nil {
				errs <- fmt.Errorf("waiter %d: Lock: %w", i, err)
				return
			}
			if err := l.Unlock(ctx, lease); err != nil {
				errs <- fmt.Errorf("waiter %d: Unlock: %w", i, err)
			}
		})
	}
	require.Eventually(t, func() bool { return started.Load() == int64(waiters) }, time.Minute, time.Millisecond)
	time.Sleep(500 * time.Millisecond) // all in Wait (their first TryLock failed)
	before := count()
	start := time.Now()
	require.NoError(t, ls[0].Unlock(OpCtx(t), first))
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	per := float64(count()-before) / float64(waiters)
	t.Logf("%d handoffs in %v: %.1f dialect calls per handoff", waiters, time.Since(start), per)
	return per
}
