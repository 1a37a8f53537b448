package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// testDeadContextIsNotLocked: a call that fails for its context must not report
// ErrLocked for a free key.
func (s *suite) testDeadContextIsNotLocked(t *testing.T) {
	a, b := s.client(t), s.client(t)
	key := s.key(t)
	ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	lease, err := a.TryLock(ctx, key, s.long)
	if err == nil {
		t.Fatalf("%s: TryLock with a context whose deadline passed succeeded (Fence %d)", rContext, lease.Fence)
	}
	if errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("%s: TryLock of a free key with a dead context returned ErrLocked (%v); a failure that is not contention must not look like it", rErrors, err)
	}
	lb := s.lock(t, b, key, s.long, rErrors)
	s.unlock(t, b, lb, rErrors)
}

// testPartitionIsNotLocked: a client cut off from the server gets an error that is not
// ErrLocked, promptly, and leaves nothing locked.
func (s *suite) testPartitionIsNotLocked(t *testing.T) {
	a, b := s.client(t), s.client(t)
	if a.Partition == nil {
		notRun(t, "Partition")
		return
	}
	key := s.key(t)
	heal := a.Partition()
	ctx, cancel := context.WithTimeout(t.Context(), s.op)
	start := time.Now()
	lease, err := a.TryLock(ctx, key, s.long)
	took := time.Since(start)
	cancel()
	heal()
	if err == nil {
		t.Fatalf("%s: TryLock through a partition succeeded (Fence %d)", rErrors, lease.Fence)
	}
	if errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("%s: TryLock of a free key through a partition returned ErrLocked (%v); a transport failure must not look like contention", rErrors, err)
	}
	if took > 2*s.op {
		t.Fatalf("%s: TryLock through a partition took %v with a context of %v", rContext, took, s.op)
	}
	lb, _, _, err := s.acquireWithin(t, b, key, s.long, 3*s.op)
	if err != nil {
		t.Fatalf("%s: key %q stays locked after a partitioned client's failed TryLock: %v", rErrors, key, err)
	}
	s.unlock(t, b, lb, rErrors)
}

// testAbandonedAttempt: a TryLock whose context ends while its request is in flight
// (the request reaches the server after the caller gave up) must not leave the key
// locked: the backend removes its half-made lock with a fresh, bounded context.
func (s *suite) testAbandonedAttempt(t *testing.T) {
	a, b := s.client(t), s.client(t)
	if a.Delay == nil {
		notRun(t, "Delay")
		return
	}
	key := s.key(t)
	d := 300 * time.Millisecond
	restore := a.Delay(d)
	defer restore()
	ctx, cancel := context.WithTimeout(t.Context(), d/3)
	start := time.Now()
	lease, err := a.TryLock(ctx, key, s.long)
	took := time.Since(start)
	cancel()
	if err == nil {
		t.Fatalf("%s: TryLock with a %v context over a %v delay succeeded (Fence %d)", rContext, d/3, d, lease.Fence)
	}
	if errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("%s: an abandoned TryLock of a free key returned ErrLocked (%v)", rErrors, err)
	}
	if took > d/3+s.op {
		t.Fatalf("%s: TryLock took %v with a context of %v", rContext, took, d/3)
	}
	// By now + 2d the request has reached the server; the cleanup follows it.
	sleepCtx(t.Context(), time.Until(start.Add(2*d)))
	lb, _, _, err := s.acquireWithin(t, b, key, s.long, 6*d+2*s.op)
	if err != nil {
		t.Fatalf("%s: key %q stays locked after an abandoned TryLock (its half-made lock was not removed): %v", rErrors, key, err)
	}
	s.unlock(t, b, lb, rErrors)
}
