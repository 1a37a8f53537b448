// Command redis runs one job under a lock in a single Redis server (redislock).
//
//	go run ./examples/redis -addr 127.0.0.1:6379
//
// The address defaults to $DISTLOCK_REDIS_ADDR (see docker-compose.yml), else
// 127.0.0.1:6379.
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

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redislock"
)

func main() {
	addr := flag.String("addr", envOr("DISTLOCK_REDIS_ADDR", "127.0.0.1:6379"), "Redis server `host:port`")
	key := flag.String("key", "example-job", "the lock's key")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	client := redis.NewClient(&redis.Options{Addr: *addr})
	defer client.Close()
	locker, err := redislock.New(client, nil)
	if err != nil {
		fail(err)
	}
	defer locker.Close() // runs before client.Close: deferred calls run last-in first-out
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
