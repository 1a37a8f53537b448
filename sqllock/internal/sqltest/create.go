package sqltest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/sqllock"
	"github.com/stretchr/testify/require"
)

// testConcurrentCreate: Lockers created at once on a new table all work.
func (e Env) testConcurrentCreate(t *testing.T) {
	opts := &sqllock.Options{Table: "create_" + strings.ToLower(driver.NewToken()[:8])}
	news := make([]func(*sqllock.Options) (Locker, error), 4)
	for i := range news {
		news[i] = e.Constructor(t) // handles made here: no t.Fatal in the goroutines
	}
	ls := make([]Locker, len(news))
	errs := make([]error, len(news))
	var wg sync.WaitGroup
	for i, f := range news {
		wg.Go(func() { ls[i], errs[i] = f(opts) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...), "concurrent constructors")
	won := 0
	for _, l := range ls {
		t.Cleanup(func() { l.Close() })
		if _, err := l.TryLock(OpCtx(t), "k", time.Minute); err == nil {
			won++
		} else {
			require.ErrorIs(t, err, distlock.ErrLocked)
		}
	}
	require.Equal(t, 1, won, "Lockers that acquired the same key")
}

// testDDL: with SkipCreateTable the constructor creates no table (and fails when
// there is none); the DDL creates one that works, and can run again.
func (e Env) testDDL(t *testing.T) {
	table := "ddl_" + strings.ToLower(driver.NewToken()[:8])
	opts := &sqllock.Options{Table: table, SkipCreateTable: true}
	_, err := e.Constructor(t)(opts)
	requireOpError(t, err, e.Backend, "New", "", err) // the database's error
	require.Contains(t, err.Error(), table)

	ddl, err := e.DDL(table)
	require.NoError(t, err)
	require.Contains(t, ddl, table)
	for range 2 { // idempotent
		if e.MultiStatement {
			e.Exec(t, ddl)
			continue
		}
		for _, q := range strings.Split(strings.TrimSuffix(ddl, ";\n"), ";\n") {
			e.Exec(t, q)
		}
	}
	l := e.New(t, opts)
	lease, err := l.TryLock(OpCtx(t), "k", time.Minute)
	require.NoError(t, err)
	require.EqualValues(t, 1, lease.Fence)
	require.NoError(t, l.Unlock(OpCtx(t), lease))

	_, err = e.DDL("bad name")
	requireOpError(t, err, e.Backend, "DDL", "", distlock.ErrInvalid)
	def, err := e.DDL("")
	require.NoError(t, err)
	require.Contains(t, def, sqllock.DefaultTable)
}
