package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/memlock"
)

// Do runs a job on one instance at a time: TryLock, keep the lease alive while the
// job runs, release when it returns.
func ExampleDo() {
	locker := memlock.New() // or any backend's Locker
	err := distlock.Do(context.Background(), locker, "nightly-report", &distlock.DoOptions{TTL: 10 * time.Second},
		func(ctx context.Context) error {
			// ctx is cancelled if the lease is lost: stop touching shared state then.
			fmt.Println("generating the report")
			return nil
		})
	if errors.Is(err, distlock.ErrLocked) {
		fmt.Println("another instance is generating it")
	}
	// Output: generating the report
}

// Hold keeps a lease alive in the background; its Context dies with the lease.
func ExampleHold() {
	ctx := context.Background()
	locker := memlock.New()
	lease, err := locker.TryLock(ctx, "migration", 5*time.Second)
	if err != nil {
		return
	}
	held := distlock.Hold(ctx, locker, lease, &distlock.HoldOptions{TTL: 5 * time.Second})
	defer held.Release(context.Background())

	locker.Revoke("migration") // what a server failover or a long pause does
	<-held.Context().Done()
	fmt.Println(errors.Is(context.Cause(held.Context()), distlock.ErrNotHeld))
	// Output: true
}

// Lock waits for a key; bound the wait with the context.
func ExampleLock() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	locker := memlock.New()
	if _, err := locker.TryLock(ctx, "k", time.Minute); err != nil {
		return
	}
	_, err := distlock.Lock(ctx, locker, "k", time.Minute, nil)
	fmt.Println(errors.Is(err, distlock.ErrLocked), errors.Is(err, context.DeadlineExceeded))
	// Output: true true
}

// Fence rejects writes from a holder that paused past its lease.
func ExampleLease_fence() {
	ctx := context.Background()
	locker := memlock.New()
	var highest uint64 // the resource keeps the highest fence it has seen
	write := func(fence uint64) error {
		if fence < highest {
			return fmt.Errorf("stale fence %d < %d", fence, highest)
		}
		highest = fence
		return nil
	}
	a, err := locker.TryLock(ctx, "file", time.Minute)
	if err != nil {
		return
	}
	locker.Revoke("file") // a pauses; its lease lapses
	b, err := locker.TryLock(ctx, "file", time.Minute)
	if err != nil {
		return
	}
	fmt.Println(write(b.Fence))
	fmt.Println(write(a.Fence)) // a wakes up and writes late
	// Output:
	// <nil>
	// stale fence 1 < 2
}
