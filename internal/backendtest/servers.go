package backendtest

import (
	"context"
	"database/sql"
	"io"
	"log"
	"net"
	"strconv"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/faultproxy"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/redislock"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/mysql"
	"github.com/distlock/distlock/sqllock/postgres"
	"github.com/distlock/distlock/zklock"
)

// cleanupTimeout bounds the clean-ups of the tests' Lockers (a crashed client's
// cannot reach its server).
const cleanupTimeout = time.Second

// proxy returns a fault proxy in front of addr, closed when t ends (after what is
// registered later), and a Crash that cuts it for good: connections are reset and
// new ones refused, as for a process that was killed.
func proxy(t testing.TB, addr string) (*faultproxy.Proxy, func()) {
	t.Helper()
	p, err := faultproxy.New(addr, nil)
	if err != nil {
		t.Fatalf("faultproxy.New(%s): %v", addr, err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, p.Cut
}

// must fails t when err is not nil.
func must(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func startRedis(env *testenv.Env, name string) (Backend, error) {
	srv, err := env.Redis()
	if err != nil {
		return Backend{}, err
	}
	return Backend{
		Name: "redis",
		NewClient: func(t testing.TB, owner string) Client {
			p, crash := proxy(t, srv.Addr())
			cli := redis.NewClient(&redis.Options{Addr: p.Addr(), DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
			t.Cleanup(func() { _ = cli.Close() })
			l, err := redislock.New(cli, &redislock.Options{Prefix: "distlock-" + name, Owner: owner, CleanupTimeout: cleanupTimeout})
			must(t, "redislock.New", err)
			t.Cleanup(func() { _ = l.Close() })
			return Client{Locker: l, Crash: crash}
		},
		Owners: true,
		TTL:    time.Second,
		Freed:  time.Second + 250*time.Millisecond,
	}, nil
}

func startEtcd(env *testenv.Env, name string) (Backend, error) {
	srv, err := env.Etcd()
	if err != nil {
		return Backend{}, err
	}
	return Backend{
		Name: "etcd",
		NewClient: func(t testing.TB, owner string) Client {
			p, crash := proxy(t, srv.Addr())
			cli, err := clientv3.New(clientv3.Config{
				Endpoints:            []string{p.Addr()},
				DialTimeout:          2 * time.Second,
				DialKeepAliveTime:    time.Second,
				DialKeepAliveTimeout: time.Second,
				DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
					Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
					MinConnectTimeout: time.Second,
				})},
				Logger: zap.NewNop(),
			})
			must(t, "clientv3.New", err)
			t.Cleanup(func() { _ = cli.Close() })
			l, err := etcdlock.New(cli, &etcdlock.Options{Prefix: "distlock-" + name + "/", Owner: owner, CleanupTimeout: cleanupTimeout})
			must(t, "etcdlock.New", err)
			t.Cleanup(func() { _ = l.Close() })
			return Client{Locker: l, Crash: crash}
		},
		Owners: true,
		// Leases of whole seconds, at least testenv.EtcdMinLeaseTTL; the server
		// checks expiry every 500ms, then deletes the key through raft.
		TTL:   testenv.EtcdMinLeaseTTL,
		Freed: testenv.EtcdMinLeaseTTL + time.Second,
	}, nil
}

// zkSessionTimeout is the session timeout the ZooKeeper clients ask for.
const zkSessionTimeout = 2 * time.Second

func startZooKeeper(env *testenv.Env, name string) (Backend, error) {
	srv, err := env.ZooKeeper()
	if err != nil {
		return Backend{}, err
	}
	quiet := &zklock.ConnectOptions{ZK: []func(*zk.Conn){zk.WithLogger(log.New(io.Discard, "", 0))}}
	return Backend{
		Name: "zookeeper",
		NewClient: func(t testing.TB, owner string) Client {
			p, crash := proxy(t, srv.Addr())
			sess, err := zklock.Connect(opCtx(t), []string{p.Addr()}, zkSessionTimeout, quiet)
			must(t, "zklock.Connect", err)
			l, err := zklock.New(sess, &zklock.Options{Prefix: "/distlock-" + name, Owner: owner, TickTime: testenv.ZooKeeperTickTime})
			if err != nil {
				sess.Close()
				t.Fatalf("zklock.New: %v", err)
			}
			// The Session first, so that the Locker's Close returns at once.
			t.Cleanup(func() {
				sess.Close()
				_ = l.Close()
			})
			return Client{Locker: l, Crash: crash}
		},
		Owners: true,
		TTL:    time.Second,
		// A crashed client's session expires zkSessionTimeout after the server last
		// heard from it, rounded up to the server's tick; the rest is for a loaded
		// machine.
		Freed: zkSessionTimeout + time.Second,
	}, nil
}

func startPostgres(env *testenv.Env, name string) (Backend, error) {
	srv, err := env.Postgres()
	if err != nil {
		return Backend{}, err
	}
	return Backend{
		Name: "postgres",
		NewClient: func(t testing.TB, owner string) Client {
			p, crash := proxy(t, srv.Addr())
			cfg, err := pgxpool.ParseConfig(srv.URL)
			must(t, "pgxpool.ParseConfig", err)
			host, port, err := net.SplitHostPort(p.Addr())
			must(t, "proxy address", err)
			n, err := strconv.ParseUint(port, 10, 16)
			must(t, "proxy port", err)
			cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(n)
			cfg.ConnConfig.ConnectTimeout = 2 * time.Second
			cfg.MaxConns = 4
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			must(t, "pgxpool.NewWithConfig", err)
			t.Cleanup(pool.Close)
			l, err := postgres.New(opCtx(t), pool, &sqllock.Options{Table: name + "_locks", Owner: owner, CleanupTimeout: cleanupTimeout, EndSessionTimeout: cleanupTimeout})
			must(t, "postgres.New", err)
			t.Cleanup(func() { _ = l.Close() })
			return Client{Locker: l, Crash: crash}
		},
		Owners: true,
		TTL:    time.Second,
		Freed:  time.Second + 250*time.Millisecond,
	}, nil
}

func startMariaDB(env *testenv.Env, name string) (Backend, error) {
	srv, err := env.MariaDB()
	if err != nil {
		return Backend{}, err
	}
	// go-sql-driver/mysql logs the connections a crash breaks; the tests expect them.
	_ = gomysql.SetLogger(log.New(io.Discard, "", 0))
	return Backend{
		Name: "mariadb",
		NewClient: func(t testing.TB, owner string) Client {
			p, crash := proxy(t, srv.Addr())
			cfg, err := gomysql.ParseDSN(srv.DSN)
			must(t, "mysql.ParseDSN", err)
			cfg.Addr = p.Addr()
			cfg.Timeout = 2 * time.Second
			cfg.InterpolateParams = true
			db, err := sql.Open("mysql", cfg.FormatDSN())
			must(t, "sql.Open", err)
			t.Cleanup(func() { _ = db.Close() })
			l, err := mysql.New(opCtx(t), db, &sqllock.Options{Table: name + "_locks", Owner: owner, CleanupTimeout: cleanupTimeout, EndSessionTimeout: cleanupTimeout})
			must(t, "mysql.New", err)
			t.Cleanup(func() { _ = l.Close() })
			return Client{Locker: l, Crash: crash}
		},
		Owners: true,
		TTL:    time.Second,
		Freed:  time.Second + 250*time.Millisecond,
	}, nil
}
