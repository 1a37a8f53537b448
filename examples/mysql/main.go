// Command mysql runs one job under a lock kept as a row of a MySQL 8 or MariaDB
// table (sqllock/mysql.New creates the table if it is missing).
//
//	go run ./examples/mysql -dsn 'user:password@tcp(127.0.0.1:3306)/db'
//
// The DSN (go-sql-driver/mysql's format; it must name a database) defaults to
// $DISTLOCK_MYSQL_DSN (see docker-compose.yml).
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
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock/mysql" // and the driver "mysql"
)

func main() {
	dsn := flag.String("dsn", envOr("DISTLOCK_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/distlock"), "go-sql-driver/mysql `DSN` naming a database")
	key := flag.String("key", "example-job", "the lock's key")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	db, err := sql.Open("mysql", *dsn)
	if err != nil {
		fail(err)
	}
	defer db.Close()
	locker, err := mysql.New(ctx, db, nil)
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

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "example:", err)
	os.Exit(1)
}
