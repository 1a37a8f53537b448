package conformance

import (
	"testing"

	"github.com/distlock/distlock"
)

func (s *suite) testCapabilities(t *testing.T) {
	l := s.client(t)
	_, isWaiter := l.(distlock.Waiter)
	_, isInspector := l.(distlock.Inspector)
	if isWaiter != s.h.Caps.Waiter {
		t.Errorf("%s: Capabilities.Waiter is %v but the client implements distlock.Waiter: %v", rHarness, s.h.Caps.Waiter, isWaiter)
	}
	if isInspector != s.h.Caps.Inspector {
		t.Errorf("%s: Capabilities.Inspector is %v but the client implements distlock.Inspector: %v", rHarness, s.h.Caps.Inspector, isInspector)
	}
	for name, set := range map[string]bool{
		"Crash": s.h.Faults.Crash != nil, "Partition": s.h.Faults.Partition != nil,
		"Delay": s.h.Faults.Delay != nil, "PauseServer": s.h.Faults.PauseServer != nil,
		"RestartServer": s.h.Faults.RestartServer != nil,
	} {
		if !set {
			t.Logf("Harness.Faults.%s is nil: its tests will be skipped (NOT RUN)", name)
		}
	}
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
