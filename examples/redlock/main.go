// Command redlock runs one job under a RedLock lock over independent Redis masters
// (redlock): it holds the key while a majority of the masters grant it.
//
//	go run ./examples/redlock -addrs 127.0.0.1:6379,127.0.0.1:6380,127.0.0.1:6381
//
// The addresses default to $DISTLOCK_REDLOCK_ADDRS (see docker-compose.yml), else
// three servers on 127.0.0.1:6379-6381.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redlock"
)

func main() {
	addrs := flag.String("addrs", envOr("DISTLOCK_REDLOCK_ADDRS", "127.0.0.1:6379,127.0.0.1:6380,127.0.0.1:6381"),
		"comma-separated `host:port` of independent Redis masters (an odd number)")
	key := flag.String("key", "example-job", "the lock's key")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	var clients []redis.UniversalClient
	for _, a := range strings.Split(*addrs, ",") {
		c := redis.NewClient(&redis.Options{Addr: strings.TrimSpace(a)})
		defer c.Close()
		clients = append(clients, c)
	}
	locker, err := redlock.New(clients, nil)
	if err != nil {
		fail(err)
	}
	defer locker.Close() // runs before the clients' Close: deferred calls run last-in first-out
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
