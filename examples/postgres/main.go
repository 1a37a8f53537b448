// Command postgres runs one job under a lock kept as a row of a PostgreSQL table
// (sqllock/postgres.New creates the table if it is missing). Waiters wake by
// LISTEN/NOTIFY.
//
//	go run ./examples/postgres -url 'postgres://user:password@127.0.0.1:5432/db?sslmode=disable'
//
// The URL defaults to $DISTLOCK_POSTGRES_URL (see docker-compose.yml).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock/postgres"
)

func main() {
	url := flag.String("url", envOr("DISTLOCK_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "PostgreSQL connection `URL`")
	key := flag.String("key", "example-job", "the lock's key")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	pool, err := pgxpool.New(ctx, *url)
	if err != nil {
		fail(err)
	}
	defer pool.Close()
	locker, err := postgres.New(ctx, pool, nil)
	if err != nil {
		fail(err)
	}
	defer locker.Close() // before the pool
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
