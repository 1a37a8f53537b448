package conformance

import (
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// testFenceIncreasing: Fence strictly increases across clients, Unlock, expiry and a
// client that joins later.
func (s *suite) testFenceIncreasing(t *testing.T) {
	a, b := s.client(t), s.client(t)
	key := s.key(t)
	var fences []uint64
	add := func(l distlock.Lease, how string) {
		t.Helper()
		if n := len(fences); n > 0 && l.Fence <= fences[n-1] {
			t.Fatalf("%s: acquisition %d of %q (%s) got Fence %d, not above the previous %d (history %v)", rFence, n+1, key, how, l.Fence, fences[n-1], fences)
		}
		fences = append(fences, l.Fence)
	}
	l1 := s.lock(t, a, key, s.long, rFence)
	add(l1, "first, client A")
	s.unlock(t, a, l1, rFence)
	l2 := s.lock(t, b, key, s.long, rFence)
	add(l2, "client B after A's Unlock")
	s.unlock(t, b, l2, rFence)
	l3 := s.lock(t, a, key, s.ttl, rFence)
	add(l3, "client A again")
	l4, ok := s.lapse(t, a, b, l3)
	if !ok {
		return
	}
	add(l4, "client B after A's lease lapsed")
	s.unlock(t, b, l4, rFence)
	c := s.client(t)
	l5 := s.lock(t, c, key, s.long, rFence)
	add(l5, "a new client")
	s.unlock(t, c, l5, rFence)
}

// testRenewKeepsIdentity: Renew keeps Key, Token and Fence, and moves Expires to no
// later than the renewal's start + ttl.
func (s *suite) testRenewKeepsIdentity(t *testing.T) {
	a := s.client(t)
	key := s.key(t)
	la := s.lock(t, a, key, s.long, rFence)
	start := time.Now()
	next, err := a.Renew(s.opCtx(t), la, s.long)
	returned := time.Now()
	if err != nil {
		t.Fatalf("%s: Renew of a held lease: %v", rOwner, err)
	}
	if next.Key != la.Key || next.Token != la.Token || next.Fence != la.Fence {
		t.Fatalf("%s: Renew changed the lease's identity: %+v became %+v (Renew must keep Key, Token and Fence)", rFence, la, next)
	}
	if excess, late := expiresLate(start, returned, next.Expires, s.long); late {
		t.Fatalf("%s: Renew's Expires is %v after the renewal's start + ttl", rLease, excess)
	}
	if !next.Expires.After(time.Now()) {
		t.Fatalf("%s: Renew returned a lease that has already expired", rLease)
	}
	s.unlock(t, a, next, rFence)
}
