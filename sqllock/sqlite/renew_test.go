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
