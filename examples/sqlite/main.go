// Command sqlite runs one job under a lock kept as a row of an SQLite table
// (sqllock/sqlite.New, with the pure-Go driver modernc.org/sqlite: no cgo).
// Processes of one host that share the file exclude each other; run it twice at
// once to see the second skip.
//
//	go run ./examples/sqlite -db /tmp/distlock-example.db
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock/sqlite" // and the driver "sqlite"
)

func main() {
	path := flag.String("db", filepath.Join(os.TempDir(), "distlock-example.db"), "SQLite database `file`")
	key := flag.String("key", "example-job", "the lock's key")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	// A busy timeout makes writers wait for each other's file lock.
	db, err := sql.Open("sqlite", "file:"+*path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		fail(err)
	}
	defer db.Close()
	locker, err := sqlite.New(ctx, db, nil)
	if err != nil {
		fail(err)
	}
	defer locker.Close() // before the database handle
	report(distlock.Do(ctx, locker, *key, doOptions(), job))
}

// job is the work that must not run on two instances at once. ctx ends if the
// lease is lost.
func job(ctx context.Context) error {
	fmt.Println("holding the lock; working for a second")
	select {
	case <-time.After(time.Second):
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func doOptions() *distlock.DoOptions {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return &distlock.DoOptions{TTL: 10 * time.Second, Observer: distlock.Observer{Logger: logger}}
}

func report(err error) {
	switch {
	case err == nil:
		fmt.Println("done; lock released")
	case errors.Is(err, distlock.ErrLocked):
		fmt.Println("another instance holds the lock; skipping")
	default:
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "example:", err)
	os.Exit(1)
}
