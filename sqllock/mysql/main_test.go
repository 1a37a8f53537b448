package mysql

import (
	"database/sql"
	"testing"
	"time"

	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/faultproxy"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

var mySrv *testenv.MariaDBServer

func TestMain(m *testing.M) {
	testenv.Main(m, func(env *testenv.Env) error {
		var err error
		mySrv, err = env.MariaDB()
		return err
	})
}

// newDB returns a database handle to the test MariaDB at addr (a proxy; "" for the
// server itself), closed when t ends. tweak, if not nil, changes the DSN.
func newDB(t testing.TB, addr string, tweak func(*gomysql.Config)) *sql.DB {
	t.Helper()
	cfg, err := gomysql.ParseDSN(mySrv.DSN)
	require.NoError(t, err)
	if addr != "" {
		cfg.Addr = addr
	}
	cfg.Timeout = 5 * time.Second
	cfg.InterpolateParams = true
	if tweak != nil {
		tweak(cfg)
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// newLocker returns a Locker on a database handle of its own to addr ("" for the
// server itself); the Locker is closed, then the handle, when t ends.
func newLocker(t testing.TB, addr string, opts *sqllock.Options) *Locker {
	t.Helper()
	l, err := New(sqltest.OpCtx(t), newDB(t, addr, nil), opts)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// newClient returns a Locker that reaches the server through a fault proxy of its
// own, the proxy, and the Locker as a conformance client: Crash closes its
// database handle, Partition and Delay act on its proxy.
func newClient(t testing.TB, opts *sqllock.Options) (*Locker, *faultproxy.Proxy, conformance.Client) {
	t.Helper()
	p, err := faultproxy.New(mySrv.Addr(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	db := newDB(t, p.Addr(), nil)
	l, err := New(sqltest.OpCtx(t), db, opts)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l, p, sqltest.ProxiedClient(l, p, func() { _ = db.Close() })
}
