package sqllock

import (
	"context"
	"database/sql"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/faultproxy"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite"
)

var (
	pgSrv *testenv.PostgresServer
	mySrv *testenv.MariaDBServer
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild()) // a child process of the SQLite tests: no servers
	}
	testenv.Main(m, func(env *testenv.Env) error {
		var err error
		if pgSrv, err = env.Postgres(); err != nil {
			return err
		}
		mySrv, err = env.MariaDB()
		return err
	})
}

// opCtx returns a context for one call, bounded generously for a shared machine.
func opCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// client is one test client: its Locker, and the proxy between it and the server
// (nil for SQLite).
type client struct {
	proxy *faultproxy.Proxy
	crash func() // closes the client's connections
}

// clients maps each Locker the tests made (distlock.Locker) to its *client.
var clients sync.Map

func clientOf(t *testing.T, l distlock.Locker) *client {
	t.Helper()
	c, ok := clients.Load(l)
	if !ok {
		t.Fatalf("harness: %T %p is not a client made by this test's harness", l, l)
	}
	return c.(*client)
}

// newProxy starts a fault proxy to addr, closed when t ends.
func newProxy(t *testing.T, addr string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(addr, nil)
	if err != nil {
		t.Fatalf("faultproxy: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// pgPool returns a pool to the test PostgreSQL at addr (the server or a proxy),
// closed when t ends.
func pgPool(t testing.TB, addr string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgSrv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if addr != "" {
		host, port := splitHostPort(t, addr)
		cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, port
	}
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// newPG returns a PostgresLocker on table through its own proxy, registered as a
// client.
func newPG(t *testing.T, opts *Options) *PostgresLocker {
	t.Helper()
	p := newProxy(t, pgSrv.Addr())
	pool := pgPool(t, p.Addr())
	l, err := NewPostgres(opCtx(t), pool, opts)
	if err != nil {
		t.Fatalf("NewPostgres: %v", err)
	}
	t.Cleanup(l.waitCleanups) // before the pool closes (cleanups run last-in first-out)
	clients.Store(distlock.Locker(l), &client{proxy: p, crash: pool.Close})
	t.Cleanup(func() { clients.Delete(distlock.Locker(l)) })
	return l
}

// myDB returns a database handle to the test MariaDB at addr (the server or a
// proxy), closed when t ends.
func myDB(t testing.TB, addr string, tweak func(*mysql.Config)) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(mySrv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	if addr != "" {
		cfg.Addr = addr
	}
	cfg.Timeout = 5 * time.Second
	cfg.InterpolateParams = true
	if tweak != nil {
		tweak(cfg)
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// newMy returns a MySQL Locker through its own proxy, registered as a client.
func newMy(t *testing.T, opts *Options) *Locker {
	t.Helper()
	p := newProxy(t, mySrv.Addr())
	db := myDB(t, p.Addr(), nil)
	l, err := NewMySQL(opCtx(t), db, opts)
	if err != nil {
		t.Fatalf("NewMySQL: %v", err)
	}
	t.Cleanup(l.waitCleanups)
	clients.Store(distlock.Locker(l), &client{proxy: p, crash: func() { _ = db.Close() }})
	t.Cleanup(func() { clients.Delete(distlock.Locker(l)) })
	return l
}

// sqliteDSN is how the tests open a SQLite file.
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(10000)"
}

// sqliteDB opens the SQLite file at path, closed when t ends.
func sqliteDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", sqliteDSN(path))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// newLite returns a SQLite Locker on the file at path, registered as a client.
func newLite(t *testing.T, path string, opts *Options) *Locker {
	t.Helper()
	db := sqliteDB(t, path)
	l, err := NewSQLite(opCtx(t), db, opts)
	if err != nil {
		t.Fatalf("NewSQLite: %v", err)
	}
	t.Cleanup(l.waitCleanups)
	clients.Store(distlock.Locker(l), &client{crash: func() { _ = db.Close() }})
	t.Cleanup(func() { clients.Delete(distlock.Locker(l)) })
	return l
}
