package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
	"github.com/stretchr/testify/require"
)

// TestRenewBatchExact: sqltest.RenewBatchExact.
func TestRenewBatchExact(t *testing.T) {
	db := newDB(t, filepath.Join(t.TempDir(), "locks.db"))
	l, err := New(sqltest.OpCtx(t), db, &sqllock.Options{Table: "renew_batch"})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	t.Cleanup(func() { releaseGate(db) })
	sqltest.RenewBatchExact(t, l, &dialect{db: db, sql: newStatements("renew_batch"), gate: gateOf(db)})
}

// TestDeadlinesWhileStalled: sqltest.DeadlinesWhileStalled, while a
// transaction of another handle on the file holds its write lock (the Locker's
// statements wait in SQLite's busy handler, for up to the busy timeout of 10s).
func TestDeadlinesWhileStalled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	l, _ := newClient(t, path, &sqllock.Options{Table: "renew_stall"})
	other, err := newDB(t, path).Conn(t.Context())
	require.NoError(t, err)
	defer other.Close()
	sqltest.DeadlinesWhileStalled(t, l,
		func() {
			_, err := other.ExecContext(sqltest.OpCtx(t), `BEGIN IMMEDIATE`)
			require.NoError(t, err)
		},
		func() {
			_, err := other.ExecContext(sqltest.OpCtx(t), `ROLLBACK`)
			require.NoError(t, err)
		})
}
