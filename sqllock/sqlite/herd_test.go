package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
	"github.com/stretchr/testify/require"
)

// TestNoHerd: 200 waiters over 4 Lockers (each on a database handle of its own)
// cost a few statements per handoff.
func TestNoHerd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	var count []*sqltest.Counting
	ls := make([]distlock.Locker, 4)
	for i := range ls {
		o, err := (&sqllock.Options{Table: "herd"}).WithDefaults()
		require.NoError(t, err)
		db := newDB(t, path)
		d := &dialect{db: db, owner: o.Owner, sql: newStatements(o.Table), gate: gateOf(db)}
		require.NoError(t, d.setup(sqltest.OpCtx(t), o.Table, false))
		c := &sqltest.Counting{Dialect: d}
		count = append(count, c)
		core, err := sqllock.NewLocker(backend, c, &o)
		require.NoError(t, err)
		l := &Locker{Locker: core, db: db}
		t.Cleanup(func() { l.Close() })
		ls[i] = l
	}
	per := sqltest.NoHerd(t, ls, 200, func() (n int64) {
		for _, c := range count {
			n += c.N.Load()
		}
		return n
	})
	require.Less(t, per, 30.0, "dialect calls per handoff")
}
