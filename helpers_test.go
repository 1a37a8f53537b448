package distlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/memlock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// plain hides a Locker's optional interfaces (Waiter, Inspector, LossNotifier).
type plain struct{ distlock.Locker }

// flaky fails Renew with a transport error while failRenew is set, and fails TryLock
// with one for the first failTry calls.
type flaky struct {
	distlock.Locker
	failRenew atomic.Bool
	failTry   atomic.Int32
	renews    atomic.Int32
}

var errTransport = errors.New("transport: connection refused")

func (f *flaky) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	if f.failTry.Add(-1) >= 0 {
		return distlock.Lease{}, errTransport
	}
	return f.Locker.TryLock(ctx, key, ttl)
}

func (f *flaky) Renew(ctx context.Context, l distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	f.renews.Add(1)
	if f.failRenew.Load() {
		return distlock.Lease{}, errTransport
	}
	return f.Locker.Renew(ctx, l, ttl)
}

// within fails the test unless ch is closed or delivers within d.
func within[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s: nothing within %v", what, d)
	}
	var zero T
	return zero
}

func TestLockWaitsForUnlock(t *testing.T) {
	for name, l := range map[string]distlock.Locker{"waiter": memlock.New(), "backoff": plain{memlock.New()}} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			first, err := l.TryLock(ctx, "job", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan distlock.Lease, 1)
			go func() {
				lease, err := distlock.Lock(ctx, l, "job", time.Minute, &distlock.LockOptions{MaxBackoff: 20 * time.Millisecond})
				if err != nil {
					t.Error(err)
				}
				got <- lease
			}()
			if err := l.Unlock(ctx, first); err != nil {
				t.Fatal(err)
			}
			second := within(t, got, 5*time.Second, "Lock after Unlock")
			if second.Fence <= first.Fence {
				t.Fatalf("fence %d after %d", second.Fence, first.Fence)
			}
		})
	}
}

func TestLockGivesUpWithJoinedError(t *testing.T) {
	l := plain{memlock.New()}
	if _, err := l.TryLock(t.Context(), "job", time.Minute); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := distlock.Lock(ctx, l, "job", time.Minute, nil)
	if !errors.Is(err, distlock.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want ErrLocked joined with DeadlineExceeded", err)
	}
}

func TestLockRetriesTransportErrors(t *testing.T) {
	f := &flaky{Locker: memlock.New()}
	f.failTry.Store(3)
	lease, err := distlock.Lock(t.Context(), f, "job", time.Minute, &distlock.LockOptions{MinBackoff: time.Millisecond})
	if err != nil || lease.Fence == 0 {
		t.Fatalf("Lock after 3 transport errors: %v", err)
	}
	// When the context ends during transport errors, the error says so: not ErrLocked.
	f.failTry.Store(1 << 30)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	_, err = distlock.Lock(ctx, f, "other", time.Minute, nil)
	if !errors.Is(err, errTransport) || errors.Is(err, distlock.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the transport error joined with DeadlineExceeded, not ErrLocked", err)
	}
}

func TestLockRejectsBadInput(t *testing.T) {
	l := memlock.New()
	if _, err := distlock.Lock(t.Context(), l, "", time.Minute, nil); !errors.Is(err, distlock.ErrInvalid) {
		t.Fatalf("empty key: %v", err)
	}
	if _, err := distlock.Lock(t.Context(), l, "k", time.Minute, &distlock.LockOptions{MinBackoff: time.Second, MaxBackoff: time.Millisecond}); !errors.Is(err, distlock.ErrInvalid) {
		t.Fatalf("MaxBackoff below MinBackoff: %v", err)
	}
}

func TestHoldKeepsLeasePastTTL(t *testing.T) {
	l := memlock.New()
	ttl := 150 * time.Millisecond
	lease, err := l.TryLock(t.Context(), "job", ttl)
	if err != nil {
		t.Fatal(err)
	}
	h := distlock.Hold(t.Context(), l, lease, &distlock.HoldOptions{TTL: ttl})
	time.Sleep(3 * ttl) // let the original ttl lapse three times over
	if _, err := l.TryLock(t.Context(), "job", ttl); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock of a held key past its original ttl: %v", err)
	}
	if h.Err() != nil || h.Context().Err() != nil {
		t.Fatalf("held lease reported lost: %v", h.Err())
	}
	if !h.Lease().Expires.After(lease.Expires) {
		t.Fatal("Lease() did not move forward")
	}
	if err := h.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if cause := context.Cause(h.Context()); cause == nil || errors.Is(cause, distlock.ErrNotHeld) {
		t.Fatalf("after Release the context's cause is %v, want a non-loss cause", cause)
	}
	if _, err := l.TryLock(t.Context(), "job", ttl); err != nil {
		t.Fatalf("TryLock after Release: %v", err)
	}
}

func TestHoldSignalsLossAtOnce(t *testing.T) {
	for name, wrap := range map[string]func(*memlock.Locker) distlock.Locker{
		"LossNotifier": func(m *memlock.Locker) distlock.Locker { return m },
		"Renew":        func(m *memlock.Locker) distlock.Locker { return plain{m} },
	} {
		t.Run(name, func(t *testing.T) {
			m := memlock.New()
			l := wrap(m)
			lease, err := l.TryLock(t.Context(), "job", 300*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			h := distlock.Hold(t.Context(), l, lease, &distlock.HoldOptions{TTL: 300 * time.Millisecond, Every: 20 * time.Millisecond})
			m.Revoke("job")
			within(t, h.Context().Done(), 2*time.Second, "Held.Context after the lease was revoked")
			if cause := context.Cause(h.Context()); !errors.Is(cause, distlock.ErrNotHeld) {
				t.Fatalf("cause %v, want ErrNotHeld", cause)
			}
			if !errors.Is(h.Err(), distlock.ErrNotHeld) {
				t.Fatalf("Err() = %v", h.Err())
			}
			if err := h.Release(t.Context()); !errors.Is(err, distlock.ErrNotHeld) {
				t.Fatalf("Release of a lost lease: %v, want ErrNotHeld", err)
			}
		})
	}
}

func TestHoldRetriesTransientErrorsUntilExpires(t *testing.T) {
	f := &flaky{Locker: memlock.New()}
	ttl := 300 * time.Millisecond
	lease, err := f.TryLock(t.Context(), "job", ttl)
	if err != nil {
		t.Fatal(err)
	}
	f.failRenew.Store(true)
	h := distlock.Hold(t.Context(), plain{f}, lease, &distlock.HoldOptions{TTL: ttl})
	within(t, h.Context().Done(), 5*time.Second, "Held.Context when renewals keep failing")
	if lostAt := time.Now(); lostAt.Before(lease.Expires) {
		t.Fatalf("declared lost %v before Expires, while renewals failed only transiently", lease.Expires.Sub(lostAt))
	}
	if !errors.Is(context.Cause(h.Context()), distlock.ErrNotHeld) {
		t.Fatalf("cause %v", context.Cause(h.Context()))
	}
	if n := f.renews.Load(); n < 3 {
		t.Fatalf("only %d renewal attempts before expiry; transient errors must be retried", n)
	}
	_ = h.Release(t.Context())
}

func TestHoldRecoversFromTransientErrors(t *testing.T) {
	f := &flaky{Locker: memlock.New()}
	ttl := 300 * time.Millisecond
	lease, err := f.TryLock(t.Context(), "job", ttl)
	if err != nil {
		t.Fatal(err)
	}
	f.failRenew.Store(true)
	h := distlock.Hold(t.Context(), plain{f}, lease, &distlock.HoldOptions{TTL: ttl})
	for start := time.Now(); f.renews.Load() < 2; { // two failures, then the network heals
		if time.Since(start) > 5*time.Second {
			t.Fatal("Hold made fewer than 2 renewal attempts in 5s")
		}
		time.Sleep(5 * time.Millisecond) // polling pace, bounded by the deadline above
	}
	f.failRenew.Store(false)
	deadline := lease.Expires.Add(ttl)
	for time.Now().Before(deadline) {
		if h.Lease().Expires.After(lease.Expires) {
			break
		}
		time.Sleep(5 * time.Millisecond) // polling pace, bounded by the deadline

	}
	if h.Err() != nil {
		t.Fatalf("lost after the transient errors healed: %v", h.Err())
	}
	if err := h.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := f.renews.Load(); n < 3 {
		t.Fatalf("renewals: %d", n)
	}
	after := f.renews.Load()
	time.Sleep(ttl / 2) // renewal must have stopped with Release
	if n := f.renews.Load(); n != after {
		t.Fatalf("%d renewals after Release", n-after)
	}
}

func TestHoldRejectsBadOptions(t *testing.T) {
	l := memlock.New()
	lease, _ := l.TryLock(t.Context(), "job", time.Minute)
	h := distlock.Hold(t.Context(), l, lease, &distlock.HoldOptions{TTL: time.Second, Every: time.Second})
	if !errors.Is(h.Err(), distlock.ErrInvalid) || h.Context().Err() == nil {
		t.Fatalf("Every == TTL: %v", h.Err())
	}
	h = distlock.Hold(t.Context(), l, distlock.Lease{}, nil)
	if h.Err() == nil {
		t.Fatal("Hold of a zero lease reported no error")
	}
}

func TestDoRunsUnderTheLock(t *testing.T) {
	l := memlock.New()
	ran := false
	err := distlock.Do(t.Context(), l, "job", &distlock.DoOptions{TTL: time.Second}, func(ctx context.Context) error {
		ran = true
		if _, err := l.TryLock(ctx, "job", time.Second); !errors.Is(err, distlock.ErrLocked) {
			t.Errorf("key not held inside Do: %v", err)
		}
		return nil
	})
	if err != nil || !ran {
		t.Fatalf("Do: %v, ran %v", err, ran)
	}
	if _, err := l.TryLock(t.Context(), "job", time.Second); err != nil {
		t.Fatalf("key not released after Do: %v", err)
	}
}

func TestDoReturnsErrLockedWithoutRunning(t *testing.T) {
	l := memlock.New()
	if _, err := l.TryLock(t.Context(), "job", time.Minute); err != nil {
		t.Fatal(err)
	}
	err := distlock.Do(t.Context(), l, "job", nil, func(context.Context) error {
		t.Error("fn ran while the key was held elsewhere")
		return nil
	})
	if !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("got %v, want ErrLocked", err)
	}
}

func TestDoReportsLossWhileRunning(t *testing.T) {
	m := memlock.New()
	errFn := errors.New("fn stopped")
	err := distlock.Do(t.Context(), m, "job", &distlock.DoOptions{TTL: time.Second}, func(ctx context.Context) error {
		m.Revoke("job")
		<-ctx.Done() // the held context dies with the lease
		return errFn
	})
	if !errors.Is(err, distlock.ErrNotHeld) || !errors.Is(err, errFn) {
		t.Fatalf("got %v, want fn's error joined with ErrNotHeld", err)
	}
}

func TestDoMinHoldKeepsTheKey(t *testing.T) {
	l := memlock.New()
	minHold := 300 * time.Millisecond
	fnDone := make(chan time.Time, 1)
	doDone := make(chan error, 1)
	start := time.Now()
	go func() {
		doDone <- distlock.Do(t.Context(), l, "tick", &distlock.DoOptions{TTL: time.Second, MinHold: minHold}, func(context.Context) error {
			fnDone <- time.Now()
			return nil
		})
	}()
	within(t, fnDone, 5*time.Second, "fn")
	if _, err := l.TryLock(t.Context(), "tick", time.Second); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("key free right after a short fn, within MinHold: %v", err)
	}
	if err := within(t, doDone, 5*time.Second, "Do"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < minHold {
		t.Fatalf("Do returned after %v, before MinHold %v", took, minHold)
	}
	if _, err := l.TryLock(t.Context(), "tick", time.Second); err != nil {
		t.Fatalf("key still held after MinHold: %v", err)
	}
}

func TestDoWaitIsCancellable(t *testing.T) {
	l := memlock.New()
	if _, err := l.TryLock(t.Context(), "job", time.Minute); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- distlock.Do(ctx, l, "job", &distlock.DoOptions{Wait: true}, func(context.Context) error { return nil })
	}()
	select { // Do must be waiting, not returning, while the key is held
	case err := <-done:
		t.Fatalf("Do returned %v while the key was held", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	err := within(t, done, 5*time.Second, "Do after cancel")
	if !errors.Is(err, distlock.ErrLocked) || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want ErrLocked joined with Canceled", err)
	}
}

func TestDoReleasesOnPanic(t *testing.T) {
	l := memlock.New()
	func() {
		defer func() {
			if recover() == nil {
				t.Error("panic was swallowed")
			}
		}()
		_ = distlock.Do(t.Context(), l, "job", nil, func(context.Context) error { panic("boom") })
	}()
	if _, err := l.TryLock(t.Context(), "job", time.Second); err != nil {
		t.Fatalf("key still held after a panic in fn: %v", err)
	}
}

func TestObserverSeesEvents(t *testing.T) {
	l := memlock.New()
	var ops []distlock.Op
	obs := distlock.Observer{OnEvent: func(ev distlock.Event) { ops = append(ops, ev.Op) }}
	err := distlock.Do(t.Context(), l, "job", &distlock.DoOptions{TTL: time.Second, Observer: obs}, func(context.Context) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) < 2 || ops[0] != distlock.OpAcquire || ops[len(ops)-1] != distlock.OpRelease {
		t.Fatalf("events %v, want acquire ... release", ops)
	}
}

// short grants at most cap, whatever ttl is asked (as ZooKeeper caps at the session
// timeout).
type short struct {
	distlock.Locker
	cap time.Duration
}

func (s short) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	return s.Locker.TryLock(ctx, key, min(ttl, s.cap))
}

func (s short) Renew(ctx context.Context, l distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	return s.Locker.Renew(ctx, l, min(ttl, s.cap))
}

func TestHoldRenewsWithinAShorterGrant(t *testing.T) {
	l := short{memlock.New(), 150 * time.Millisecond}
	lease, err := l.TryLock(t.Context(), "job", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// TTL 1s would renew every 333ms: too late for a 150ms grant.
	h := distlock.Hold(t.Context(), l, lease, &distlock.HoldOptions{TTL: time.Second})
	time.Sleep(600 * time.Millisecond) // four grants' worth
	if err := h.Err(); err != nil {
		t.Fatalf("lost a lease renewed by Every instead of by what the backend granted: %v", err)
	}
	if err := h.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// inspectOnly hides Waiter and LossNotifier but keeps Inspector.
type inspectOnly struct{ *memlock.Locker }

func (i inspectOnly) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	return i.Locker.TryLock(ctx, key, ttl)
}

func (i inspectOnly) Renew(ctx context.Context, l distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	return i.Locker.Renew(ctx, l, ttl)
}

func (i inspectOnly) Unlock(ctx context.Context, l distlock.Lease) error {
	return i.Locker.Unlock(ctx, l)
}

func (i inspectOnly) Inspect(ctx context.Context, key string) (distlock.Holder, error) {
	return i.Locker.Inspect(ctx, key)
}

func TestLockPollsAtTheHoldersExpiry(t *testing.T) {
	l := inspectOnly{memlock.New()}
	ttl := 300 * time.Millisecond
	held, err := l.TryLock(t.Context(), "job", ttl)
	if err != nil {
		t.Fatal(err)
	}
	// With a 10s backoff ceiling, only the Inspector can make Lock wake at expiry.
	opts := &distlock.LockOptions{MinBackoff: 5 * time.Second, MaxBackoff: 10 * time.Second}
	lease, err := distlock.Lock(t.Context(), l, "job", time.Second, opts)
	if err != nil {
		t.Fatal(err)
	}
	if late := time.Since(held.Expires); late > 250*time.Millisecond {
		t.Fatalf("acquired %v after the holder's expiry", late)
	}
	_ = l.Unlock(t.Context(), lease)
}
