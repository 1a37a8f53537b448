package testenv

import (
	"context"
	"database/sql"
	"testing"
	"time"
)

func myExec(t *testing.T, dsn, query string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func myCount(t *testing.T, dsn string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	if err := mysqlQuery(ctx, dsn, "SELECT COUNT(*) FROM testenv_t", &n); err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

// TestMariaDB starts a MariaDB of its own and checks that it keeps its data across
// a restart and a SIGKILL, and stops answering while paused.
func TestMariaDB(t *testing.T) {
	t.Setenv(EnvMySQLDSN, "") // this test signals its server, so it must own it
	env, err := newEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := env.close(); err != nil {
			t.Error(err)
		}
	}()
	s, err := env.MariaDB()
	if err != nil {
		t.Fatal(err)
	}
	if s.External() {
		t.Fatal("MariaDB returned an External server with DISTLOCK_MYSQL_DSN unset")
	}
	t.Logf("%s, DSN %s", s, s.DSN)
	myExec(t, s.DSN, "CREATE TABLE testenv_t (v int) ENGINE=InnoDB")
	myExec(t, s.DSN, "INSERT INTO testenv_t VALUES (1)")

	s.Restart(t)
	if n := myCount(t, s.DSN); n != 1 {
		t.Fatalf("after Restart: %d rows, want 1", n)
	}
	myExec(t, s.DSN, "INSERT INTO testenv_t VALUES (2)")
	s.Kill(t)
	s.Restart(t)
	if n := myCount(t, s.DSN); n != 2 {
		t.Fatalf("after Kill and Restart: %d rows, want 2", n)
	}

	s.Pause(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	var one int
	err = mysqlQuery(ctx, s.DSN, "SELECT 1", &one)
	cancel()
	if err == nil {
		t.Fatal("a paused MariaDB answered SELECT 1")
	}
	s.Resume(t)
	if n := myCount(t, s.DSN); n != 2 {
		t.Fatalf("after Resume: %d rows, want 2", n)
	}
}

func TestMariaDBExternal(t *testing.T) {
	env, err := newEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer env.close()
	t.Setenv(EnvMySQLDSN, "root@tcp(127.0.0.1:1)/distlock?timeout=2s")
	if _, err := env.MariaDB(); err == nil {
		t.Fatal("MariaDB accepted a DISTLOCK_MYSQL_DSN where nothing listens")
	}
}
