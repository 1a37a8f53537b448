package sqlite_test

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
	"github.com/distlock/distlock/sqllock/sqlite"
)

// Processes on one host share a SQLite file; the busy timeout makes writers wait
// for each other.
func ExampleNew() {
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
	locker, err := sqlite.New(ctx, db, &sqllock.Options{Table: "locks", Owner: "worker-1"})
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close() // before the database handle
	lease, err := locker.TryLock(ctx, "nightly-report", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("acquired, fence", lease.Fence)

	_, err = locker.TryLock(ctx, "nightly-report", time.Minute)
	fmt.Println("second attempt locked:", errors.Is(err, distlock.ErrLocked))

	h, err := locker.Inspect(ctx, "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held by", h.Owner)

	if err := locker.Unlock(ctx, lease); err != nil {
		log.Fatal(err)
	}
	lease, err = locker.TryLock(ctx, "nightly-report", time.Minute)
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

// A daily job prunes the rows of keys that have been free for a week (a key per
// report run leaves a row each); a pruned key that comes back still gets a larger
// fence than it ever had.
func ExampleLocker_Prune() {
	db, err := sql.Open("sqlite", "file:/var/lib/app/locks.db?_pragma=busy_timeout(5000)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	locker, err := sqlite.New(ctx, db, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	for {
		n, err := locker.Prune(ctx, 7*24*time.Hour)
		if err != nil {
			log.Print(err)
		} else {
			log.Printf("pruned %d rows", n)
		}
		time.Sleep(24 * time.Hour)
	}
}
