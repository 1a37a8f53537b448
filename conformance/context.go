package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// prompt runs f and fails the test under rContext if it takes longer than the suite's
// op timeout.
func (s *suite) prompt(t *testing.T, what string, f func()) {
	t.Helper()
	start := time.Now()
	f()
	if took := time.Since(start); took > s.op {
		t.Fatalf("%s: %s took %v (op timeout %v)", rContext, what, took, s.op)
	}
}

// testCancelledBeforeCall: every call with a cancelled context returns promptly;
// TryLock fails with the context's error and leaves nothing behind.
func (s *suite) testCancelledBeforeCall(t *testing.T) {
	a, b := s.client(t), s.client(t)
	key, held := s.key(t), s.key(t)
	lh := s.lock(t, a, held, s.long, rContext)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	s.prompt(t, "TryLock with a cancelled context", func() {
		lease, err := a.TryLock(ctx, key, s.long)
		if err == nil {
			t.Fatalf("%s: TryLock with a cancelled context succeeded (Fence %d)", rContext, lease.Fence)
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: TryLock with a cancelled context: got %v, want an error wrapping context.Canceled", rContext, err)
		}
	})
	s.prompt(t, "Renew with a cancelled context", func() { _, _ = a.Renew(ctx, lh, s.long) })
	s.prompt(t, "Unlock with a cancelled context", func() { _ = a.Unlock(ctx, distlock.Lease{Key: key, Token: driver.NewToken()}) })
	if w, ok := b.Locker.(distlock.Waiter); ok {
		s.prompt(t, "Wait on a held key with a cancelled context", func() {
			err := w.Wait(ctx, held)
			if !errors.Is(err, distlock.ErrLocked) || !errors.Is(err, context.Canceled) {
				t.Fatalf("%s: Wait on a held key with a cancelled context: got %v, want errors.Join(ErrLocked, context.Canceled)", rWaiter, err)
			}
		})
	}
	if in, ok := b.Locker.(distlock.Inspector); ok {
		s.prompt(t, "Inspect with a cancelled context", func() { _, _ = in.Inspect(ctx, held) })
	}
	lb := s.lock(t, b, key, s.long, rContext)
	s.unlock(t, b, lb, rContext)
	if _, err := a.Renew(s.opCtx(t), lh, s.long); err != nil {
		t.Fatalf("%s: Renew after calls with a cancelled context: %v", rContext, err)
	}
	s.unlock(t, a, lh, rContext)
}

// testExpiringContexts: TryLock under contexts that expire during the call either
// succeeds or fails with an error that is not ErrLocked, and leaves nothing locked.
func (s *suite) testExpiringContexts(t *testing.T) {
	a, b := s.client(t), s.client(t)
	for i := range 16 {
		key := s.key(t)
		timeout := time.Duration(i) * 150 * time.Microsecond
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		start := time.Now()
		lease, err := a.TryLock(ctx, key, s.long)
		took := time.Since(start)
		cancel()
		if took > timeout+s.op {
			t.Fatalf("%s: TryLock with a %v context took %v", rContext, timeout, took)
		}
		if err == nil {
			s.unlock(t, a, lease, rContext)
		} else if errors.Is(err, distlock.ErrLocked) {
			t.Fatalf("%s: TryLock of a free key under a %v context returned ErrLocked (%v)", rErrors, timeout, err)
		}
		lb, _, _, err := s.acquireWithin(t, b, key, s.long, 3*s.op)
		if err != nil {
			t.Fatalf("%s: key %q stays locked after a TryLock whose %v context expired: %v", rErrors, key, timeout, err)
		}
		s.unlock(t, b, lb, rContext)
	}
}

// testLockGivesUp: Lock on a held key returns errors.Join(ErrLocked, ctx.Err())
// promptly when its context ends.
func (s *suite) testLockGivesUp(t *testing.T) {
	a, b := s.client(t), s.client(t)
	key := s.key(t)
	la := s.lock(t, a, key, s.long, rContext)
	wait := 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	start := time.Now()
	_, err := distlock.Lock(ctx, b.Locker, key, s.long, nil)
	took := time.Since(start)
	if !errors.Is(err, distlock.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%s: Lock on a held key until its context's deadline: got %v, want ErrLocked joined with context.DeadlineExceeded", rContext, err)
	}
	if took > wait+s.op {
		t.Fatalf("%s: Lock with a %v context returned after %v", rContext, wait, took)
	}
	s.unlock(t, a, la, rContext)
}
