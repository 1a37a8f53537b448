package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite"
)

// Processes on one host share a SQLite file; the busy timeout makes writers wait
// for each other.
func ExampleNewSQLite() {
	dir, err := os.MkdirTemp("", "sqllock-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "locks.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	ctx := context.Background()
	l, err := sqllock.NewSQLite(ctx, db, &sqllock.Options{Table: "locks", Owner: "worker-1"})
	if err != nil {
		log.Fatal(err)
	}
	lease, err := l.TryLock(ctx, "nightly-report", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("acquired, fence", lease.Fence)

	_, err = l.TryLock(ctx, "nightly-report", time.Minute)
	fmt.Println("second attempt locked:", errors.Is(err, distlock.ErrLocked))

	h, err := l.Inspect(ctx, "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held by", h.Owner)

	if err := l.Unlock(ctx, lease); err != nil {
		log.Fatal(err)
	}
	lease, err = l.TryLock(ctx, "nightly-report", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("acquired again, fence", lease.Fence)
	// Output:
	// acquired, fence 1
	// second attempt locked: true
	// held by worker-1
	// acquired again, fence 2
}

// On PostgreSQL, distlock.Lock waits for a release through LISTEN/NOTIFY.
func ExampleNewPostgres() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	l, err := sqllock.NewPostgres(ctx, pool, nil) // table distlock_leases
	if err != nil {
		log.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	lease, err := distlock.Lock(wctx, l, "migrations", time.Minute, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Unlock(ctx, lease)
	// Pass lease.Fence to the resource you change, so that it can reject a
	// holder that paused past lease.Expires.
	fmt.Println("migrating with fence", lease.Fence)
}
