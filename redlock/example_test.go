package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redlock"
)

// A RedLock over five independent Redis masters: one attempt with TryLock, and the
// fence handed to the protected resource.
func Example() {
	addrs := []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003", "127.0.0.1:7004", "127.0.0.1:7005"}
	var clients []redis.UniversalClient
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{
			Addr: a,
			// Fail fast on a dead master: it must cost an attempt no more than the
			// per-node timeout, and go-redis retries failed dials by default.
			DialTimeout:   100 * time.Millisecond,
			DialerRetries: 1,
		})
		defer c.Close()
		clients = append(clients, c)
	}
	l, err := redlock.New(clients, nil)
	if err != nil {
		log.Fatal(err) // a bad option, or clients that are not independent masters
	}
	defer l.Close() // stops its pub/sub connections; the clients stay open
	ctx := context.Background()
	lease, err := l.TryLock(ctx, "nightly-report", 30*time.Second)
	switch {
	case errors.Is(err, distlock.ErrLocked):
		fmt.Println("another instance runs the report")
		return
	case err != nil:
		var oe *distlock.OpError // every error is one: Backend "redlock", Op, Key, cause
		if errors.As(err, &oe) {
			log.Fatalf("%s failed: %v", oe.Op, oe.Err) // e.g. fewer than a quorum of masters answered
		}
		log.Fatal(err)
	}
	defer l.Unlock(ctx, lease)
	fmt.Printf("write the report with fence %d until %v\n", lease.Fence, lease.Expires)
}

// distlock.Do acquires, renews in the background and releases; Lock waits through
// the Locker's Wait (pub/sub on every master).
func Example_do() {
	var l *redlock.Locker // from redlock.New
	ctx := context.Background()
	err := distlock.Do(ctx, l, "migrate-orders", &distlock.DoOptions{TTL: 30 * time.Second, Wait: true},
		func(ctx context.Context) error {
			// ctx is cancelled if the lease is lost.
			return nil
		})
	if err != nil {
		log.Print(err)
	}
}
