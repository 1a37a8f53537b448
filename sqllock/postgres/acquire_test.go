package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
	"github.com/stretchr/testify/require"
)

// TestAcquireRowChanged: a TryLock whose snapshot has the key's row expired but
// whose UPDATE finds it changed by a transaction that commits meanwhile (so that
// its first statement returns -1) decides with the second statement: ErrLocked when
// another acquire took the row, and the key, with a fence above the pruned one,
// when Prune deleted it.
func TestAcquireRowChanged(t *testing.T) {
	const table = "acquire_changed"
	pool := newPool(t, "")
	l, err := New(sqltest.OpCtx(t), pool, &sqllock.Options{Table: table})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	admin := newPool(t, "")

	for _, tc := range []struct {
		name   string
		change string // run in a transaction that commits while the TryLock waits
		locked bool
	}{
		{"taken", `UPDATE ` + table + ` SET token = 'other', fence = fence + 1, expires_at = now() + interval '1 hour' WHERE key_hash = $1`, true},
		{"pruned", `WITH d AS (DELETE FROM ` + table + ` WHERE key_hash = $1 RETURNING fence)
UPDATE ` + table + ` SET fence = GREATEST(fence, (SELECT max(fence) FROM d)) WHERE key_hash = ` + highWater, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "changed-" + tc.name + "-" + distlock.NewToken()
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
			go func() {
				lease, err := l.TryLock(sqltest.OpCtx(t), key, time.Minute)
				done <- result{lease, err}
			}()
			require.Eventually(t, func() bool { // its UPDATE waits for the row
				var n int
				err := admin.QueryRow(sqltest.OpCtx(t), `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE 'WITH u AS%'`).Scan(&n)
				require.NoError(t, err)
				return n == 1
			}, 10*time.Second, 5*time.Millisecond)
			require.NoError(t, tx.Commit(sqltest.OpCtx(t)))
			got := <-done
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
