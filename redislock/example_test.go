package redislock_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redislock"
)

// Take a lease, hand its fence to the protected resource, release it.
func Example() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("DISTLOCK_REDIS_ADDR"), "127.0.0.1:6379")})
	defer client.Close()
	l, err := redislock.New(client, &redislock.Options{Prefix: "myapp", Owner: "worker-1"})
	if err != nil {
		log.Fatal(err) // a bad option
	}
	defer l.Close() // before the client's Close (defers run last-in first-out)

	lease, err := l.TryLock(ctx, "reports/nightly", 30*time.Second)
	if err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	// Write to the resource with lease.Fence; it rejects a smaller fence than it has seen.
	fmt.Println("acquired, fence > 0:", lease.Fence > 0)

	_, err = l.TryLock(ctx, "reports/nightly", 30*time.Second)
	fmt.Println("second TryLock is locked:", errors.Is(err, distlock.ErrLocked))

	if err := l.Unlock(ctx, lease); err != nil {
		fmt.Println("unlock:", err)
	}
	// Output:
	// acquired, fence > 0: true
	// second TryLock is locked: true
}

// Run a job under the lock with the root package's Do: it acquires, renews in the
// background, cancels the job's context if the lease is lost, and releases.
func Example_do() {
	client := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("DISTLOCK_REDIS_ADDR"), "127.0.0.1:6379")})
	defer client.Close()
	l, err := redislock.New(client, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	err = distlock.Do(context.Background(), l, "cron/cleanup", &distlock.DoOptions{TTL: 10 * time.Second},
		func(ctx context.Context) error {
			fmt.Println("running the job while holding the lock")
			return nil
		})
	fmt.Println("done:", err)
	// Output:
	// running the job while holding the lock
	// done: <nil>
}

// Errors are *distlock.OpError values: errors.Is tells the cause, errors.As the
// details.
func ExampleNew_errors() {
	_, err := redislock.New(nil, nil)
	var oe *distlock.OpError
	fmt.Println(errors.Is(err, distlock.ErrInvalid), errors.As(err, &oe) && oe.Op == "New")
	fmt.Println(err)
	// Output:
	// true true
	// redislock: New: distlock: invalid argument: nil redis client
}

// The same Locker works on a Redis Cluster: a key's lock and fence keys share one
// hash slot, whatever braces the key contains.
func ExampleNew_cluster() {
	client := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: strings.Split(cmp.Or(os.Getenv("DISTLOCK_REDIS_CLUSTER_ADDRS"), "127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002"), ","),
	})
	defer client.Close()
	l, err := redislock.New(client, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	ctx := context.Background()
	lease, err := l.TryLock(ctx, "tenant-{42}/invoices", time.Minute)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("unlock:", l.Unlock(ctx, lease))
	// Output:
	// unlock: <nil>
}

// Inspect reports who holds a key; Wait blocks until it may be free.
func ExampleLocker_Inspect() {
	client := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("DISTLOCK_REDIS_ADDR"), "127.0.0.1:6379")})
	defer client.Close()
	holder, err := redislock.New(client, &redislock.Options{Owner: "batch-host:4242"})
	if err != nil {
		log.Fatal(err)
	}
	defer holder.Close()
	other, err := redislock.New(client, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer other.Close()

	ctx := context.Background()
	lease, err := holder.TryLock(ctx, "migrations", time.Minute)
	if err != nil {
		fmt.Println(err)
		return
	}
	h, err := other.Inspect(ctx, "migrations")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("held by", h.Owner, "with the same fence:", h.Fence == lease.Fence)

	released := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		released <- other.Wait(wctx, "migrations")
	}()
	_ = holder.Unlock(ctx, lease)
	fmt.Println("Wait:", <-released)
	// Output:
	// held by batch-host:4242 with the same fence: true
	// Wait: <nil>
}
