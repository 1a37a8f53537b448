package main

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

// TestCheck runs distlock check against every real server of this test binary,
// each started with settings that it must report: testenv runs PostgreSQL with
// fsync=off, MariaDB with innodb_flush_log_at_trx_commit=2 and ZooKeeper with
// forceSync=no (fast, and unsafe on a machine crash); Redis with appendfsync always
// and noeviction (safe), and once with allkeys-lru (unsafe).
func TestCheck(t *testing.T) {
	env := baseEnv(t)
	db := sqliteURL(t)
	code, _, errOut := runDL(t, env, "run", "--backend", db, "k", "--", "true") // creates the file
	require.Equal(t, 0, code, errOut)
	for _, tc := range []struct {
		name    string
		backend string
		code    int
		want    []string // lines (prefixes) of stdout
	}{
		{name: "redis", backend: backendURLs["redis"], code: 0,
			want: []string{"server     " + servers.redis.Addr() + ": Redis 7", "ok         " + servers.redis.Addr() + " maxmemory-policy=noeviction", "ok         " + servers.redis.Addr() + " appendfsync=always", "result     safe"}},
		{name: "redis evicting", backend: "redis://" + servers.redisUnsafe.Addr(), code: exitUnsafe,
			want: []string{"UNSAFE     " + servers.redisUnsafe.Addr() + " maxmemory-policy=allkeys-lru: Redis evicts any key", "result     unsafe: 1 setting(s)"}},
		{name: "redlock", backend: backendURLs["redlock"], code: 0,
			want: []string{"server     node 0 (127.0.0.1:", "ok         node 2 (127.0.0.1:", "result     safe"}},
		{name: "etcd", backend: backendURLs["etcd"], code: 0,
			want: []string{"server     " + strings.TrimPrefix(backendURLs["etcd"], "etcd://") + ": etcd 3.6", "note       members=1: a single server", "note       fsync: not visible", "ok         alarms=none", "result     safe"}},
		{name: "zk", backend: backendURLs["zk"], code: exitUnsafe,
			want: []string{"server     " + servers.zk.Addr() + ": ZooKeeper 3.8", "UNSAFE     " + servers.zk.Addr() + " forceSync=no: (inferred", "note       voters=1: a single server", "result     unsafe: 1 setting(s)"}},
		{name: "postgres", backend: backendURLs["postgres"], code: exitUnsafe,
			want: []string{"server     " + servers.postgres.Addr() + ": PostgreSQL ", "UNSAFE     fsync=off", "UNSAFE     full_page_writes=off", "ok         synchronous_commit=on", "result     unsafe: 2 setting(s)"}},
		{name: "mysql", backend: backendURLs["mysql"], code: exitUnsafe,
			want: []string{"server     " + servers.mariadb.Addr() + ": MariaDB ", "UNSAFE     innodb_flush_log_at_trx_commit=2", "result     unsafe: 1 setting(s)"}},
		{name: "sqlite", backend: db, code: 0,
			want: []string{"server     " + strings.TrimPrefix(db, "sqlite://") + ": SQLite 3.", "ok         synchronous=", "note       scope=one host", "result     safe"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runDL(t, env, "check", "--backend", tc.backend)
			require.Equal(t, tc.code, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			require.Empty(t, errOut)
			lines := strings.Split(out, "\n")
			require.True(t, strings.HasPrefix(lines[0], "backend    "), "stdout:\n%s", out)
			for _, w := range tc.want {
				found := false
				for _, l := range lines {
					found = found || strings.HasPrefix(l, w)
				}
				require.True(t, found, "no line starts with %q; stdout:\n%s", w, out)
			}
		})
	}

	// A check that cannot connect exits 125.
	code, out, errOut := runDL(t, env, "check", "--backend", "redis://"+closedAddr(t))
	require.Equal(t, exitFailed, code, "stdout %q", out)
	require.Contains(t, errOut, "connection refused")
}

// TestCheckMySQLSafe: once the server flushes its log at every commit, check
// finds nothing unsafe on it.
func TestCheckMySQLSafe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := mysqldriver.ParseDSN(servers.mariadb.DSN)
	require.NoError(t, err)
	conn, err := mysqldriver.NewConnector(cfg)
	require.NoError(t, err)
	db := sql.OpenDB(conn)
	defer db.Close()
	var old string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT @@innodb_flush_log_at_trx_commit").Scan(&old))
	_, err = db.ExecContext(ctx, "SET GLOBAL innodb_flush_log_at_trx_commit = 1")
	require.NoError(t, err)
	defer func() {
		_, err := db.ExecContext(context.WithoutCancel(ctx), "SET GLOBAL innodb_flush_log_at_trx_commit = "+old)
		require.NoError(t, err)
	}()
	code, out, errOut := runDL(t, baseEnv(t), "check", "--backend", backendURLs["mysql"])
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Contains(t, out, "ok         innodb_flush_log_at_trx_commit=1\n")
	require.Contains(t, out, "result     safe")
}

// TestCheckDefault: check with no backend reads the default SQLite file, and
// creates nothing.
func TestCheckDefault(t *testing.T) {
	env := baseEnv(t)
	cache := t.TempDir()
	env = append(env, "XDG_CACHE_HOME="+cache)
	code, out, errOut := runDL(t, env, "check")
	require.Equal(t, 0, code, "stderr %s", errOut)
	require.Contains(t, out, "no such file yet")
	_, err := os.Stat(filepath.Join(cache, "distlock"))
	require.ErrorIs(t, err, os.ErrNotExist, "check created the cache directory")
}
