package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// A counter is a pgx tracer that counts the round trips of the statements its
// connections send: a batch (a pipeline of statements) counts once.
type counter struct{ n atomic.Int64 }

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *counter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (c *counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TestNoHerd: 200 waiters over 4 Lockers, all in distlock.Lock on one key; each
// release costs a few statements (a TryLock per Locker with waiters, a Wait's read
// for each loser), not one TryLock and one read per waiter.
func TestNoHerd(t *testing.T) {
	const lockers, waiters = 4, 200
	var stmts counter
	ls := make([]*Locker, lockers)
	for i := range ls {
		cfg, err := pgxpool.ParseConfig(pgSrv.URL)
		require.NoError(t, err)
		cfg.ConnConfig.Tracer = &stmts
		cfg.MaxConns = 4
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		ls[i], err = New(sqltest.OpCtx(t), pool, &sqllock.Options{Table: "herd"})
		require.NoError(t, err)
		t.Cleanup(func() { ls[i].Close() })
	}
	key := "herd-" + driver.NewToken()
	first, err := ls[0].TryLock(sqltest.OpCtx(t), key, time.Minute)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	opts := &distlock.LockOptions{MaxWait: time.Minute} // no wake-up but the releases
	var wg sync.WaitGroup
	errs := make(chan error, waiters)
	for i := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := ls[i%lockers]
			lease, err := distlock.Lock(ctx, l, key, time.Minute, opts)
			if err != nil {
				errs <- fmt.Errorf("Lock: %w", err)
				return
			}
			if err := l.Unlock(ctx, lease); err != nil {
				errs <- fmt.Errorf("Unlock: %w", err)
			}
		}()
	}
	p := payload(key)
	require.Eventually(t, func() bool {
		for _, l := range ls {
			if l.waiters.Len(p) != waiters/lockers {
				return false
			}
		}
		return true
	}, time.Minute, 10*time.Millisecond, "the waiters did not all wait")
	before := stmts.n.Load()
	start := time.Now()
	require.NoError(t, ls[0].Unlock(sqltest.OpCtx(t), first))
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	per := float64(stmts.n.Load()-before) / waiters
	t.Logf("%d handoffs in %v: %.1f statements per handoff", waiters, time.Since(start), per)
	require.Less(t, per, 20.0, "statements per handoff")
}
