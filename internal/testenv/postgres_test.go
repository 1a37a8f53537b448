package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func pgExec(t *testing.T, url, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func pgCount(t *testing.T, url string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	if err := postgresQuery(ctx, url, "SELECT count(*) FROM testenv_t", &n); err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

// TestPostgres starts a PostgreSQL of its own and checks that it keeps its data
// across a fast restart and a SIGKILL, and stops answering while paused.
func TestPostgres(t *testing.T) {
	t.Setenv(EnvPostgresURL, "") // this test signals its server, so it must own it
	env, err := newEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := env.close(); err != nil {
			t.Error(err)
		}
	}()
	s, err := env.Postgres()
	if err != nil {
		t.Fatal(err)
	}
	if s.External() {
		t.Fatal("Postgres returned an External server with DISTLOCK_POSTGRES_URL unset")
	}
	t.Logf("%s, URL %s", s, s.URL)
	pgExec(t, s.URL, "CREATE TABLE testenv_t (v int)")
	pgExec(t, s.URL, "INSERT INTO testenv_t VALUES (1)")

	s.Restart(t)
	if n := pgCount(t, s.URL); n != 1 {
		t.Fatalf("after Restart: %d rows, want 1", n)
	}
	pgExec(t, s.URL, "INSERT INTO testenv_t VALUES (2)")
	// An idle connection keeps a backend alive through the Kill unless Kill kills
	// it too; Restart then finds the old shared memory in use.
	ctx0, cancel0 := context.WithTimeout(context.Background(), 10*time.Second)
	idle, err := pgx.Connect(ctx0, s.URL)
	cancel0()
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close(context.Background())
	s.Kill(t)
	s.Restart(t)
	if n := pgCount(t, s.URL); n != 2 {
		t.Fatalf("after Kill and Restart: %d rows, want 2", n)
	}

	// A connection made before the pause has a backend of its own, which Pause must
	// stop too.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	conn, err := pgx.Connect(ctx, s.URL)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	s.Pause(t)
	var one int
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	err = conn.QueryRow(ctx, "SELECT 1").Scan(&one)
	cancel()
	if err == nil {
		t.Fatal("a paused PostgreSQL answered SELECT 1 on a connection made before the pause")
	}
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	err = postgresQuery(ctx, s.URL, "SELECT 1", &one)
	cancel()
	if err == nil {
		t.Fatal("a paused PostgreSQL answered SELECT 1 on a new connection")
	}
	s.Resume(t)
	if n := pgCount(t, s.URL); n != 2 {
		t.Fatalf("after Resume: %d rows, want 2", n)
	}
}

func TestPostgresExternal(t *testing.T) {
	env, err := newEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer env.close()
	t.Setenv(EnvPostgresURL, "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2")
	if _, err := env.Postgres(); err == nil {
		t.Fatal("Postgres accepted a DISTLOCK_POSTGRES_URL where nothing listens")
	}
}
