package conformance

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// Faults inside a cluster: the holder's server cut off from its peers, a leader
// change, a minority that loses its data. In each, the rule is rule 1 as the holder
// sees it: no other client acquires the key while the holder's latest Expires is in
// the future, and Hold's context ends no later than another client's acquisition.

// heldLease is a lease kept by distlock.Hold, so that renewals run through the fault
// as they do in production.
type heldLease struct {
	first distlock.Lease
	held  *distlock.Held
}

// hold acquires key on a and keeps it with distlock.Hold, renewing with ttl.
func (s *suite) hold(t *testing.T, a Client, key string, ttl time.Duration) heldLease {
	t.Helper()
	la := s.lock(t, a, key, ttl, rMutex)
	h := distlock.Hold(t.Context(), a.Locker, la, &distlock.HoldOptions{TTL: ttl})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.op)
		defer cancel()
		_ = h.Release(ctx)
	})
	return heldLease{first: la, held: h}
}

// holdTTL is the ttl of a held lease in the cluster tests: for ttl backends long
// enough that renewals every ttl/3 fit the op timeout, for session backends the long
// ttl (their Expires is capped by the session).
func (s *suite) holdTTL() time.Duration {
	if s.h.Caps.SessionExpiry {
		return s.long
	}
	return max(3*s.ttl, s.ttl+3*s.grace, time.Second)
}

// checkAcquiredAfter fails the test when a lease on h's key was acquired at ret while
// h still counted as held: h's latest Expires lies after ret, or Hold's context is
// still alive (beyond a scheduling allowance) after ret.
func (s *suite) checkAcquiredAfter(t *testing.T, h heldLease, ret time.Time, what string) {
	t.Helper()
	if exp := h.held.Lease().Expires; ret.Before(exp) {
		t.Fatalf("%s: %s: another client acquired %q %v before the holder's Expires (renewed %v after it acquired)",
			rMutex, what, h.first.Key, exp.Sub(ret), exp.Sub(h.first.Expires))
	}
	wait := time.NewTimer(max(time.Until(ret.Add(schedAllowance)), 0))
	defer wait.Stop()
	select {
	case <-h.held.Context().Done():
	case <-wait.C:
		t.Fatalf("%s: %s: another client acquired %q while the holder's Held.Context was still alive", rMutex, what, h.first.Key)
	}
}

// testIsolatedServer: the holder's server is cut off from its peers while the holder
// still reaches it. Renewals through it must not extend the lease; clients on the
// rest of the cluster acquire only after the holder's latest Expires and after its
// Held.Context ended; after healing the old lease is dead and fences moved on.
func (s *suite) testIsolatedServer(t *testing.T) {
	a := s.client(t)
	if a.IsolateServer == nil {
		notRun(t, "IsolateServer")
		return
	}
	// Several other clients, so that some reach servers on the majority side.
	others := []Client{s.client(t), s.client(t), s.client(t)}
	key := s.key(t)
	ttl := s.holdTTL()
	h := s.hold(t, a, key, ttl)
	heal := a.IsolateServer()
	healed := false
	defer func() {
		if !healed {
			heal()
		}
	}()
	isolated := time.Now()
	bound := ttl + s.grace + s.faultTimeout
	if s.h.Caps.SessionExpiry {
		bound = s.grace + s.faultTimeout
	}
	winner, lb, ret, errs := s.firstToAcquire(t, others, key, bound)
	if winner < 0 {
		if err := h.held.Err(); err == nil && h.held.Lease().Remaining() > 0 {
			// The holder's client moved to a server on the majority side and
			// renews there: it holds the key legitimately.
			t.Logf("the holder kept its lease through another server (Expires %v ahead); nobody else acquired", h.held.Lease().Remaining())
			return
		}
		t.Fatalf("%s: no client acquired %q within %v after its holder's server was isolated from its peers and the holder lost it (last errors: %v)",
			rExpiry, key, bound, errs)
	}
	s.checkAcquiredAfter(t, h, ret, fmt.Sprintf("%v after the holder's server was isolated", ret.Sub(isolated)))
	// The isolated server must not renew the old lease while another client holds it.
	if next, err := a.Renew(s.opCtx(t), h.held.Lease(), ttl); err == nil {
		t.Fatalf("%s: Renew through the isolated server succeeded (Expires %v from now) while another client holds %q",
			rMutex, next.Remaining(), key)
	}
	heal()
	healed = true
	if err := s.renewDead(t, a, h.held.Lease()); err != nil {
		t.Fatalf("%s: the isolated holder's Renew after healing: %v", rOwner, err)
	}
	if lb.Fence <= h.first.Fence {
		t.Fatalf("%s: Fence %d after an isolation is not above the isolated holder's %d", rFence, lb.Fence, h.first.Fence)
	}
	s.unlock(t, others[winner], lb, rMutex)
}

// firstToAcquire polls TryLock of key by each client in turn until one succeeds or
// bound passes. Errors other than ErrLocked are tolerated (a client may reach the
// isolated server); ErrInvalid ends the test.
func (s *suite) firstToAcquire(t *testing.T, cs []Client, key string, bound time.Duration) (int, distlock.Lease, time.Time, []error) {
	t.Helper()
	deadline := time.Now().Add(bound)
	pause := min(max(s.ttl/20, 2*time.Millisecond), 20*time.Millisecond)
	last := make([]error, len(cs))
	for time.Now().Before(deadline) && t.Context().Err() == nil {
		for i, c := range cs {
			ctx, cancel := context.WithTimeout(t.Context(), min(s.op, max(time.Until(deadline), time.Millisecond)))
			lease, err := c.TryLock(ctx, key, s.long)
			ret := time.Now()
			cancel()
			if err == nil {
				return i, lease, ret, nil
			}
			if errors.Is(err, distlock.ErrInvalid) {
				t.Fatalf("%s: TryLock(%s): %v", rInput, short(key), err)
			}
			last[i] = err
		}
		sleepCtx(t.Context(), pause)
	}
	return -1, distlock.Lease{}, time.Time{}, last
}

// testLeaderChange: a lease held (with Hold) through a leader change stays exclusive
// until its Expires; its holder can release it afterwards and fences keep increasing.
func (s *suite) testLeaderChange(t *testing.T) {
	s.testClusterFault(t, "ChangeLeader", "a leader change", s.h.Faults.ChangeLeader)
}

// testMinorityLosesData: a lease held (with Hold) while a minority of the servers
// loses its data stays exclusive until its Expires, and fences keep increasing.
func (s *suite) testMinorityLosesData(t *testing.T) {
	s.testClusterFault(t, "LoseMinority", "a minority of the servers losing its data", s.h.Faults.LoseMinority)
}

// testClusterFault runs fault under a held lease, then checks from another client
// that the key stays locked while the lease lives (or, if the holder lost it, that
// nobody acquired before its Expires), and that the next Fence is above the old one.
func (s *suite) testClusterFault(t *testing.T, hook, what string, fault func(t *testing.T)) {
	if fault == nil {
		notRun(t, hook)
		return
	}
	a, b := s.client(t), s.client(t)
	key := s.key(t)
	h := s.hold(t, a, key, s.holdTTL())
	fault(t)
	// Until the cluster serves again, b's attempts may fail; none may succeed while
	// the lease lives. Once b sees ErrLocked the lock survived the fault.
	var (
		lb  distlock.Lease
		ret time.Time
		err error
	)
	ok := eventually(t.Context(), s.faultTimeout, func() bool {
		lb, err = b.TryLock(s.opCtx(t), key, s.long)
		ret = time.Now()
		return err == nil || errors.Is(err, distlock.ErrLocked)
	})
	switch {
	case !ok:
		t.Fatalf("%s: the backend does not serve %v after %s: %v", rHarness, s.faultTimeout, what, err)
	case err == nil:
		// Allowed only if the holder's lease ended first (a session backend whose
		// session did not survive the fault, say).
		s.checkAcquiredAfter(t, h, ret, "after "+what)
	default: // ErrLocked: the holder releases, and b acquires after it.
		if lerr := h.held.Err(); lerr != nil {
			t.Logf("the holder lost its lease after %s: %v (the key is still locked: allowed)", what, lerr)
		}
		s.release(t, a, h)
		lb, _, ret, err = s.acquireWithin(t, b, key, s.long, s.faultTimeout+s.grace+h.held.Lease().Remaining())
		if err != nil {
			t.Fatalf("%s: %q not free after its holder released it after %s: %v", rExpiry, key, what, err)
		}
		s.checkAcquiredAfterRelease(t, h, ret)
	}
	if lb.Fence <= h.first.Fence {
		t.Fatalf("%s: Fence %d after %s is not above the fence %d issued before it", rFence, lb.Fence, what, h.first.Fence)
	}
	s.unlock(t, b, lb, rMutex)
}

// release stops h's renewal and unlocks its lease, retrying transport errors while
// the cluster recovers.
func (s *suite) release(t *testing.T, a Client, h heldLease) {
	t.Helper()
	err := h.held.Release(s.opCtx(t))
	if err == nil || errors.Is(err, distlock.ErrNotHeld) {
		return
	}
	eventually(t.Context(), s.faultTimeout, func() bool {
		err = a.Unlock(s.opCtx(t), h.held.Lease())
		return err == nil || errors.Is(err, distlock.ErrNotHeld)
	})
}

// checkAcquiredAfterRelease checks an acquisition that followed a Release: if the
// release did not unlock (the lease had been lost), the acquisition must still come
// after the lease's Expires.
func (s *suite) checkAcquiredAfterRelease(t *testing.T, h heldLease, ret time.Time) {
	t.Helper()
	if h.held.Err() == nil {
		return // released by Unlock: rule 1 allows the next holder at once
	}
	s.checkAcquiredAfter(t, h, ret, "after the lost lease was released")
}
