package conformance

import (
	"testing"

	"github.com/distlock/distlock"
)

// testCapabilities logs what the backend offers: the optional interfaces its clients
// implement (found by type assertion) and the faults the harness can inject.
func (s *suite) testCapabilities(t *testing.T) {
	c := s.client(t)
	for name, ok := range map[string]bool{
		"distlock.Waiter":       is[distlock.Waiter](c.Locker),
		"distlock.Inspector":    is[distlock.Inspector](c.Locker),
		"distlock.LossNotifier": is[distlock.LossNotifier](c.Locker),
	} {
		if ok {
			t.Logf("the client implements %s: its contract is tested", name)
		} else {
			t.Logf("the client does not implement %s", name)
		}
	}
	for _, name := range faultNames {
		if !s.faultSet(c, name) {
			t.Logf("fault %s is nil: its tests will be skipped (NOT RUN)", name)
		}
	}
}

// is reports whether l implements T.
func is[T any](l distlock.Locker) bool {
	_, ok := l.(T)
	return ok
}

// testTwoClients: ErrLocked while held, Unlock frees, re-acquire with a larger Fence.
func (s *suite) testTwoClients(t *testing.T) {
	a, b := s.client(t), s.client(t)
	key := s.key(t)
	la := s.lock(t, a, key, s.long, rMutex)
	s.expectLocked(t, b, key, rMutex, "while another client holds it")
	s.unlock(t, a, la, rMutex)
	lb := s.lock(t, b, key, s.long, rMutex)
	if lb.Fence <= la.Fence {
		t.Fatalf("%s: second acquisition of %q got Fence %d, not above the first's %d", rFence, key, lb.Fence, la.Fence)
	}
	if lb.Token == la.Token {
		t.Fatalf("%s: two acquisitions of %q share the Token %q", rLease, key, la.Token)
	}
	s.expectLocked(t, a, key, rMutex, "after the first holder unlocked and another client acquired it")
	s.unlock(t, b, lb, rMutex)
}

// testNotReentrant: a second TryLock of a held key fails even from the same client.
func (s *suite) testNotReentrant(t *testing.T) {
	a := s.client(t)
	key := s.key(t)
	la := s.lock(t, a, key, s.long, rMutex)
	s.expectLocked(t, a, key, rMutex, "from the client that already holds it (a Locker is not reentrant)")
	s.unlock(t, a, la, rMutex)
}
