package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// testRenewExtends: renewing every ttl/3 keeps the key held past the original ttl.
func (s *suite) testRenewExtends(t *testing.T) {
	a, b := s.client(t), s.client(t)
	key := s.key(t)
	ttl := max(3*s.ttl, s.ttl+3*s.grace) // renewal round trips must fit well within ttl
	la := s.lock(t, a, key, ttl, rExpiry)
	first := la.Expires
	until := first.Add(ttl + s.grace)
	checked := false
	for time.Now().Before(until) {
		// Every third of the ttl, or of what the backend granted when that is less
		// (a session's cap, a drift allowance): a Renew after Expires is ErrNotHeld.
		sleepCtx(t.Context(), min(ttl/3, la.Remaining()/3))
		next, err := a.Renew(s.opCtx(t), la, ttl)
		if err != nil {
			t.Fatalf("%s: Renew of a lease renewed every ttl/3: %v", rExpiry, err)
		}
		if !next.Expires.After(la.Expires) {
			t.Fatalf("%s: Renew did not move Expires forward (%v -> %v)", rExpiry, la.Expires, next.Expires)
		}
		la = next
		if time.Now().After(first.Add(s.grace)) {
			s.expectLocked(t, b, key, rExpiry, "past the original ttl + grace of a lease that was renewed")
			checked = true
		}
	}
	if !checked {
		t.Fatalf("%s: could not check the key past its original ttl", rHarness)
	}
	s.unlock(t, a, la, rExpiry)
}

// testUnrenewedFrees: a lease that is not renewed frees the key by ttl + grace, and
// not before its Expires.
func (s *suite) testUnrenewedFrees(t *testing.T) {
	if s.h.Caps.SessionExpiry {
		t.Log("session backend: the lease lives as long as the session; CrashedHolderFrees tests expiry")
		s.testCrashedHolderFrees(t)
		return
	}
	a, b := s.client(t), s.client(t)
	key := s.key(t)
	start := time.Now()
	la := s.lock(t, a, key, s.ttl, rExpiry)
	if excess, late := expiresLate(start, time.Now(), la.Expires, s.ttl); late {
		t.Fatalf("%s: Expires is %v after the request's start + ttl", rLease, excess)
	}
	s.expectFreedBy(t, b, la, start.Add(s.ttl+s.grace))
}

// expectFreedBy polls until b acquires la's key; it must not be before la.Expires
// and must be by the deadline (plus the polling's own latency).
func (s *suite) expectFreedBy(t *testing.T, b Client, la distlock.Lease, by time.Time) {
	t.Helper()
	var slowest time.Duration
	pause := min(max(s.ttl/20, 2*time.Millisecond), 20*time.Millisecond)
	for {
		attempt := time.Now()
		lb, err := b.TryLock(s.opCtx(t), la.Key, s.long)
		ret := time.Now()
		slowest = max(slowest, ret.Sub(attempt))
		if err == nil {
			if ret.Before(la.Expires) {
				t.Fatalf("%s: key %q acquired %v before the holder's Expires", rMutex, la.Key, la.Expires.Sub(ret))
			}
			if lb.Fence <= la.Fence {
				t.Fatalf("%s: Fence %d after expiry is not above the expired holder's %d", rFence, lb.Fence, la.Fence)
			}
			s.unlock(t, b, lb, rExpiry)
			return
		}
		if !errors.Is(err, distlock.ErrLocked) {
			t.Fatalf("%s: TryLock while waiting for an expiry: %v", rErrors, err)
		}
		if late := attempt.Sub(by); late > 2*pause+slowest+50*time.Millisecond {
			t.Fatalf("%s: key %q still held %v past ttl + grace (grace %v) by a holder that stopped renewing", rExpiry, la.Key, late, s.grace)
		}
		sleepCtx(t.Context(), pause)
	}
}

// testCrashedHolderFrees: a holder that vanishes without Unlock frees the key by ttl
// + grace (session backends: by the session timeout, stated as Grace).
func (s *suite) testCrashedHolderFrees(t *testing.T) {
	a, b := s.client(t), s.client(t)
	if a.Crash == nil {
		notRun(t, "Crash")
		return
	}
	key := s.key(t)
	ttl := s.ttl
	if s.h.Caps.SessionExpiry {
		ttl = s.long
	}
	start := time.Now()
	la := s.lock(t, a, key, ttl, rExpiry)
	a.Crash()
	crashed := time.Now()
	by := start.Add(ttl + s.grace)
	if s.h.Caps.SessionExpiry {
		by = crashed.Add(s.grace)
		la.Expires = start // a session lease ends with its session, whatever its ttl
	}
	s.expectFreedBy(t, b, la, by)
}
