package benchmarks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/distlock/distlock/internal/testenv"
)

// RedLockMasters is the number of independent Redis masters of the redlock rows.
const RedLockMasters = 5

// Servers are the servers of one matrix run, started by internal/testenv on
// loopback (or given by its DISTLOCK_* environment variables).
type Servers struct {
	Redis      *testenv.Server
	RedisNodes []*testenv.Server // RedLockMasters independent masters
	Etcd       *testenv.Server
	ZooKeeper  *testenv.Server
	Postgres   *testenv.PostgresServer
	MariaDB    *testenv.MariaDBServer
	SQLitePath string // a database file in a temporary directory
}

// StartServers starts every server the matrix needs, concurrently. A missing
// binary gives an error wrapping testenv.ErrNotInstalled (install them with
// `bash scripts/install.sh` from the repository root).
func StartServers(env *testenv.Env) (*Servers, error) {
	s := &Servers{SQLitePath: filepath.Join(env.TempDir(), "locks.db")}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	start := func(name string, f func() error) {
		wg.Go(func() {
			if err := f(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("start %s: %w", name, err))
				mu.Unlock()
			}
		})
	}
	start("redis", func() (err error) { s.Redis, err = env.Redis(); return })
	start("redis masters", func() (err error) { s.RedisNodes, err = env.RedisNodes(RedLockMasters); return })
	start("etcd", func() (err error) { s.Etcd, err = env.Etcd(); return })
	start("zookeeper", func() (err error) { s.ZooKeeper, err = env.ZooKeeper(); return })
	start("postgres", func() (err error) { s.Postgres, err = env.Postgres(); return })
	start("mariadb", func() (err error) { s.MariaDB, err = env.MariaDB(); return })
	wg.Wait()
	return s, errors.Join(errs...)
}

// Subjects returns every row of the matrix, backend by backend, on s.
func (s *Servers) Subjects(cfg Config) []Subject {
	a := Addrs{
		Redis:      s.Redis.Addr(),
		Etcd:       s.Etcd.Addr(),
		ZooKeeper:  s.ZooKeeper.Addr(),
		Postgres:   s.Postgres.URL,
		MariaDB:    s.MariaDB.DSN,
		SQLitePath: s.SQLitePath,
	}
	for _, n := range s.RedisNodes {
		a.RedisNodes = append(a.RedisNodes, n.Addr())
	}
	return Catalog(cfg, a)
}

// Addrs are where the servers of a matrix run listen.
type Addrs struct {
	Redis      string   // host:port
	RedisNodes []string // the independent masters, host:port
	Etcd       string   // host:port
	ZooKeeper  string   // host:port
	Postgres   string   // URL
	MariaDB    string   // go-sql-driver/mysql DSN
	SQLitePath string   // a database file
}

// Catalog returns every row of the matrix, backend by backend, for servers at a.
// Building it dials nothing (only a Subject's New does), so the zero Addrs gives
// the rows' names and descriptions.
func Catalog(cfg Config, a Addrs) []Subject {
	var out []Subject
	out = append(out, MemlockSubjects(cfg)...)
	out = append(out, RedisSubjects(a.Redis, cfg)...)
	out = append(out, RedLockSubjects(a.RedisNodes, cfg)...)
	out = append(out, EtcdSubjects(a.Etcd, cfg)...)
	out = append(out, ZooKeeperSubjects(a.ZooKeeper, cfg)...)
	out = append(out, PostgresSubjects(a.Postgres, cfg)...)
	out = append(out, MySQLSubjects(a.MariaDB, cfg)...)
	out = append(out, SQLiteSubjects(a.SQLitePath, cfg)...)
	return out
}

// Versions asks every server for its version, with the settings that matter for
// the numbers (durability). A server that does not answer is reported as such.
func (s *Servers) Versions(ctx context.Context) []KV {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	orErr := func(v string, err error) string {
		if err != nil {
			return "unknown (" + err.Error() + ")"
		}
		return v
	}
	var out []KV
	add := func(k, v string) { out = append(out, KV{k, v}) }

	add("Redis", orErr(redisVersion(ctx, s.Redis.Addr()))+
		fmt.Sprintf("; appendonly yes, appendfsync always; redlock: %d independent masters, same settings", len(s.RedisNodes)))
	add("etcd", orErr(func() (string, error) {
		st, err := testenv.EtcdStatus(ctx, s.Etcd.Addr())
		return st.Version, err
	}())+"; 1 member, unsafe-no-fsync, heartbeat 50ms, election 600ms")
	add("ZooKeeper", orErr(zkVersion(ctx, s.ZooKeeper.Addr()))+
		fmt.Sprintf("; standalone, tickTime %v", testenv.ZooKeeperTickTime))
	add("PostgreSQL", orErr(pgVersion(ctx, s.Postgres.URL))+"; fsync=off")
	add("MariaDB", orErr(sqlVersion(ctx, "mysql", s.MariaDB.DSN, "SELECT VERSION()"))+"; InnoDB log flushed every second")
	add("SQLite", orErr(sqlVersion(ctx, "sqlite", "file:"+s.SQLitePath+"?_pragma=busy_timeout(10000)", "SELECT sqlite_version()"))+
		" (modernc.org/sqlite); WAL, on the temporary directory's disk")
	return out
}

func redisVersion(ctx context.Context, addr string) (string, error) {
	v, err := testenv.RedisCommand(ctx, addr, "INFO", "server")
	if err != nil {
		return "", err
	}
	info, _ := v.(string)
	for _, line := range strings.Split(info, "\n") {
		if after, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return after, nil
		}
	}
	return "", errors.New("INFO server has no redis_version")
}

func zkVersion(ctx context.Context, addr string) (string, error) {
	out, err := testenv.ZooKeeperCommand(ctx, addr, "srvr")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if after, ok := strings.CutPrefix(line, "Zookeeper version: "); ok {
			v, _, _ := strings.Cut(after, ",")
			v, _, _ = strings.Cut(v, "-${") // Debian's build leaves a Maven placeholder
			return strings.TrimSpace(v), nil
		}
	}
	return "", errors.New("srvr names no version")
}

func pgVersion(ctx context.Context, url string) (string, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var v string
	err = conn.QueryRow(ctx, "SHOW server_version").Scan(&v)
	return v, err
}

func sqlVersion(ctx context.Context, driver, dsn, query string) (string, error) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var v string
	err = db.QueryRowContext(ctx, query).Scan(&v)
	return v, err
}
