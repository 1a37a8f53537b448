package postgres

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/faultproxy"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

var pgSrv *testenv.PostgresServer

func TestMain(m *testing.M) {
	testenv.Main(m, func(env *testenv.Env) error {
		var err error
		pgSrv, err = env.Postgres()
		return err
	})
}

// newPool returns a pool to the test PostgreSQL at addr (a proxy; "" for the
// server itself), closed when t ends.
func newPool(t testing.TB, addr string) *pgxpool.Pool {
	t.Helper()
	return newPoolN(t, addr, 4)
}

// newPoolN is newPool with at most n connections.
func newPoolN(t testing.TB, addr string, n int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgSrv.URL)
	require.NoError(t, err)
	if addr != "" {
		host, port, err := net.SplitHostPort(addr)
		require.NoError(t, err)
		p, err := strconv.ParseUint(port, 10, 16)
		require.NoError(t, err)
		cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(p)
	}
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	cfg.MaxConns = n
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// newLocker returns a Locker on a pool of its own to addr ("" for the server
// itself); the Locker is closed, then the pool, when t ends.
func newLocker(t testing.TB, addr string, opts *sqllock.Options) *Locker {
	t.Helper()
	l, err := New(sqltest.OpCtx(t), newPool(t, addr), opts)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// newClient returns a Locker that reaches the server through a fault proxy of its
// own, the proxy, and the Locker as a conformance client: Crash closes its pool,
// Partition and Delay act on its proxy.
func newClient(t testing.TB, opts *sqllock.Options) (*Locker, *faultproxy.Proxy, conformance.Client) {
	t.Helper()
	p, err := faultproxy.New(pgSrv.Addr(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	pool := newPool(t, p.Addr())
	l, err := New(sqltest.OpCtx(t), pool, opts)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l, p, sqltest.ProxiedClient(l, p, pool.Close)
}
