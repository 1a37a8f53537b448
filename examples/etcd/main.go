// Command etcd runs one job under a lock in etcd (etcdlock): the key is held by an
// etcd lease, and its fence is the key's create revision.
//
//	go run ./examples/etcd -endpoints 127.0.0.1:2379
//
// The endpoints default to $DISTLOCK_ETCD_ENDPOINTS (see docker-compose.yml), else
// 127.0.0.1:2379.
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

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
)

func main() {
	endpoints := flag.String("endpoints", envOr("DISTLOCK_ETCD_ENDPOINTS", "127.0.0.1:2379"), "comma-separated etcd client `endpoints`")
	key := flag.String("key", "example-job", "the lock's key")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	client, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(*endpoints, ","), DialTimeout: 5 * time.Second})
	if err != nil {
		fail(err)
	}
	defer client.Close() // after the Locker's Close
	locker, err := etcdlock.New(client, nil)
	if err != nil {
		fail(err)
	}
	defer locker.Close()
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
