package conformance

import (
	"testing"
	"time"
)

// testRenewAfterExpires: a Renew of a lease whose Expires has passed returns
// ErrNotHeld, to a longer ttl and to the same one, even while the server may still
// hold the key (within the backend's grace). The holder was told its lease ends at
// Expires; a waiter may act on that (a chase, a quarantine), so a Renew must not
// revive it.
func (s *suite) testRenewAfterExpires(t *testing.T) {
	a := s.client(t)
	for _, longer := range []bool{true, false} {
		key := s.key(t)
		la := s.lock(t, a, key, s.ttl, rOwner)
		sleepCtx(t.Context(), time.Until(la.Expires)+5*time.Millisecond)
		ttl, what := s.ttl, "the same ttl"
		if longer {
			ttl, what = s.long, "a longer ttl"
		}
		next, err := a.Renew(s.opCtx(t), la, ttl)
		if err == nil {
			_ = a.Unlock(s.opCtx(t), next)
		}
		expectNotHeld(t, err, rOwner, "Renew to "+what+" of a lease whose Expires passed "+time.Since(la.Expires).Round(time.Millisecond).String()+" ago")
	}
}
