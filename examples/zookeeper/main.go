// Command zookeeper runs one job under a lock in ZooKeeper (zklock): an
// ephemeral-sequential node that lives as long as the client's session. Its fence is
// the node's czxid.
//
//	go run ./examples/zookeeper -servers 127.0.0.1:2181
//
// The servers default to $DISTLOCK_ZK_ADDRS (see docker-compose.yml), else
// 127.0.0.1:2181.
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

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/zklock"
)

// sessionTimeout is the ZooKeeper session timeout the example asks for: a lock lives
// as long as its session. The server clamps it to its [minSessionTimeout,
// maxSessionTimeout] (by default 2 and 20 ticks: 4s to 40s); Connect reports the
// granted one, which the Locker counts with and the example takes as the lease's ttl.
const sessionTimeout = 10 * time.Second

func main() {
	servers := flag.String("servers", envOr("DISTLOCK_ZK_ADDRS", "127.0.0.1:2181"), "comma-separated ZooKeeper `host:port`s")
	key := flag.String("key", "example-job", "the lock's key")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	sess, err := zklock.Connect(cctx, strings.Split(*servers, ","), sessionTimeout, nil)
	cancel()
	if err != nil {
		fail(err)
	}
	defer sess.Close()
	locker, err := zklock.New(sess, nil)
	if err != nil {
		fail(err)
	}
	defer locker.Close()
	report(distlock.Do(ctx, locker, *key, doOptions(sess.Timeout()), job))
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

func doOptions(ttl time.Duration) *distlock.DoOptions {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return &distlock.DoOptions{TTL: ttl, Observer: distlock.Observer{Logger: logger}}
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
