package conformance

import (
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// testWaiter: Wait returns at once on a free key, blocks while the key is held, wakes
// within WaitBound of Unlock and by the holder's expiry, and Lock hands off through it.
func (s *suite) testWaiter(t *testing.T) {
	if _, ok := s.client(t).Locker.(distlock.Waiter); !ok {
		t.Log("backend is no Waiter: Lock falls back to backoff")
		return
	}
	t.Run("FreeKeyReturnsAtOnce", func(t *testing.T) {
		w := s.client(t).Locker.(distlock.Waiter)
		s.prompt(t, "Wait on a free key", func() {
			if err := w.Wait(s.opCtx(t), s.key(t)); err != nil {
				t.Fatalf("%s: Wait on a free key: %v", rWaiter, err)
			}
		})
	})
	t.Run("WakesOnUnlock", func(t *testing.T) {
		a, b := s.client(t), s.client(t)
		key := s.key(t)
		la := s.lock(t, a, key, s.long, rWaiter)
		woke := make(chan error, 1)
		go func() { woke <- b.Locker.(distlock.Waiter).Wait(t.Context(), key) }()
		hold := time.NewTimer(200 * time.Millisecond)
		defer hold.Stop()
		select {
		case err := <-woke:
			t.Fatalf("%s: Wait returned (%v) while the key was held with %v left", rWaiter, err, la.Remaining())
		case <-hold.C:
		}
		unlocked := time.Now()
		s.unlock(t, a, la, rWaiter)
		s.expectWake(t, woke, unlocked, "Unlock")
	})
	t.Run("WakesOnExpiry", func(t *testing.T) {
		if s.h.Caps.SessionExpiry {
			t.Log("session backend: keys are not freed by ttl")
			return
		}
		a, b := s.client(t), s.client(t)
		key := s.key(t)
		la := s.lock(t, a, key, s.ttl, rWaiter)
		woke := make(chan error, 1)
		go func() { woke <- b.Locker.(distlock.Waiter).Wait(t.Context(), key) }()
		s.expectWake(t, woke, la.Expires.Add(s.grace), "the holder's expiry + grace")
	})
	t.Run("LockHandsOff", func(t *testing.T) {
		a, b := s.client(t), s.client(t)
		key := s.key(t)
		la := s.lock(t, a, key, s.long, rWaiter)
		got := make(chan error, 1)
		var lb distlock.Lease
		go func() {
			var err error
			lb, err = distlock.Lock(t.Context(), b.Locker, key, s.long, nil)
			got <- err
		}()
		hold := time.NewTimer(200 * time.Millisecond)
		defer hold.Stop()
		select {
		case err := <-got:
			t.Fatalf("%s: Lock returned (%v) while the key was held", rMutex, err)
		case <-hold.C:
		}
		unlocked := time.Now()
		s.unlock(t, a, la, rWaiter)
		s.expectWake(t, got, unlocked, "Unlock (Lock through Wait)")
		if lb.Fence <= la.Fence {
			t.Fatalf("%s: handed-off Fence %d not above %d", rFence, lb.Fence, la.Fence)
		}
		s.unlock(t, b, lb, rWaiter)
	})
}

// expectWake fails the test unless woke delivers nil within WaitBound (plus the op
// timeout's share of latency) of since.
func (s *suite) expectWake(t *testing.T, woke <-chan error, since time.Time, what string) {
	t.Helper()
	bound := time.Until(since) + s.waitBound
	timer := time.NewTimer(max(bound, 0) + s.op)
	defer timer.Stop()
	select {
	case err := <-woke:
		if err != nil {
			t.Fatalf("%s: waiting for %s: %v", rWaiter, what, err)
		}
		if late := time.Since(since); late > s.waitBound {
			t.Fatalf("%s: woke %v after %s; WaitBound is %v", rWaiter, late, what, s.waitBound)
		}
	case <-timer.C:
		t.Fatalf("%s: still waiting %v after %s; WaitBound is %v", rWaiter, time.Since(since), what, s.waitBound)
	}
}
