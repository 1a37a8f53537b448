package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// TestAcquireRowChanged: a TryLock whose snapshot has the key's row expired but
// whose UPDATE finds it changed by a transaction that commits meanwhile decides on
// the row's new version: ErrLocked, in its one statement, when another acquire
// took the row (the old code's first statement returned -1 from its snapshot, and
// a second one decided); when Prune deleted the row, the second statement inserts
// it, with a fence above the pruned one.
func TestAcquireRowChanged(t *testing.T) {
	const table = "acquire_changed"
	var stmts counter
	cfg, err := pgxpool.ParseConfig(pgSrv.URL)
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = &stmts
	cfg.MaxConns = 1 // its session is named by the first TryLock, before the count
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	l, err := New(sqltest.OpCtx(t), pool, &sqllock.Options{Table: table})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	admin := newPool(t, "")

	for _, tc := range []struct {
		name   string
		change string // run in a transaction that commits while the TryLock waits
		locked bool
		stmts  int64 // that the TryLock sends
	}{
		{"taken", `UPDATE ` + table + ` SET token = 'other', fence = fence + 1, expires_at = now() + interval '1 hour' WHERE key_hash = $1`, true, 1},
		{"pruned", `WITH d AS (DELETE FROM ` + table + ` WHERE key_hash = $1 RETURNING fence)
UPDATE ` + table + ` SET fence = GREATEST(fence, (SELECT max(fence) FROM d)) WHERE key_hash = ` + highWater, false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "changed-" + tc.name + "-" + driver.NewToken()
			first, err := l.TryLock(sqltest.OpCtx(t), key, time.Minute)
			require.NoError(t, err)
			require.NoError(t, l.Unlock(sqltest.OpCtx(t), first))

			tx, err := admin.Begin(sqltest.OpCtx(t))
			require.NoError(t, err)
			defer tx.Rollback(context.Background())
			if !tc.locked { // Prune locks the high-water row first
				_, err := tx.Exec(sqltest.OpCtx(t), `SELECT 1 FROM `+table+` WHERE key_hash = `+highWater+` FOR UPDATE`)
				require.NoError(t, err)
			}
			_, err = tx.Exec(sqltest.OpCtx(t), tc.change, row(key).Hash)
			require.NoError(t, err)

			type result struct {
				lease distlock.Lease
				err   error
			}
			done := make(chan result, 1)
			before := stmts.n.Load()
			go func() {
				lease, err := l.TryLock(sqltest.OpCtx(t), key, time.Minute)
				done <- result{lease, err}
			}()
			// its UPDATE waits for the row
			require.Eventually(t, lockWaits(t, admin, "WITH u AS%", 1), 10*time.Second, 5*time.Millisecond)
			require.NoError(t, tx.Commit(sqltest.OpCtx(t)))
			got := <-done
			require.Equal(t, tc.stmts, stmts.n.Load()-before, "statements of the TryLock")
			if tc.locked {
				require.ErrorIs(t, got.err, distlock.ErrLocked)
				return
			}
			require.NoError(t, got.err)
			require.Greater(t, got.lease.Fence, first.Fence)
			require.NoError(t, l.Unlock(sqltest.OpCtx(t), got.lease))
		})
	}
}

// TestHeldMarkIsLocal: the mark by which a TryLock's statement reports a held key
// (heldSetting, valued its token) lives only in that statement's transaction: on
// the same connection, a TryLock of a key that has no row yet acquires it, even
// after a session-level value of the setting (which no token equals).
func TestHeldMarkIsLocal(t *testing.T) {
	const table = "held_mark"
	cfg, err := pgxpool.ParseConfig(pgSrv.URL)
	require.NoError(t, err)
	cfg.MaxConns = 1 // one connection for every statement
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	l, err := New(sqltest.OpCtx(t), pool, &sqllock.Options{Table: table})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })

	held := "mark-held-" + driver.NewToken()
	first, err := l.TryLock(sqltest.OpCtx(t), held, time.Minute)
	require.NoError(t, err)
	for i := range 3 {
		_, err = l.TryLock(sqltest.OpCtx(t), held, time.Minute)
		require.ErrorIs(t, err, distlock.ErrLocked)
		if i == 1 {
			_, err := pool.Exec(sqltest.OpCtx(t), `SELECT set_config('`+heldSetting+`', 'x', false)`)
			require.NoError(t, err)
		}
		lease, err := l.TryLock(sqltest.OpCtx(t), "mark-new-"+driver.NewToken(), time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Unlock(sqltest.OpCtx(t), lease))
	}
	require.NoError(t, l.Unlock(sqltest.OpCtx(t), first))
}
