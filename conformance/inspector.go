package conformance

import (
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// testInspector: Inspect reports the holder's key, fence and a plausible expiry, and
// ErrNotHeld for a free key.
func (s *suite) testInspector(t *testing.T) {
	a, b := s.client(t), s.client(t)
	in, ok := b.Locker.(distlock.Inspector)
	if !ok {
		t.Log("backend is no Inspector")
		return
	}
	key := s.key(t)
	_, err := in.Inspect(s.opCtx(t), key)
	expectNotHeld(t, err, rInspect, "Inspect of a free key")
	la := s.lock(t, a, key, s.long, rInspect)
	before := time.Now()
	h, err := in.Inspect(s.opCtx(t), key)
	if err != nil {
		t.Fatalf("%s: Inspect of a held key: %v", rInspect, err)
	}
	if h.Key != key || h.Fence != la.Fence {
		t.Fatalf("%s: Inspect reports key %q fence %d, want %q fence %d", rInspect, h.Key, h.Fence, key, la.Fence)
	}
	if h.Expires.Before(before) || h.Expires.After(time.Now().Add(s.long+s.grace)) {
		t.Fatalf("%s: Inspect reports Expires %v from now for a lease of ttl %v", rInspect, time.Until(h.Expires), s.long)
	}
	s.unlock(t, a, la, rInspect)
	_, err = in.Inspect(s.opCtx(t), key)
	expectNotHeld(t, err, rInspect, "Inspect after Unlock")
}

// testLossNotifier: when the client implements distlock.LossNotifier, Lost stays open
// while the lease is held and closes once it is unlocked.
func (s *suite) testLossNotifier(t *testing.T) {
	a := s.client(t)
	n, ok := a.Locker.(distlock.LossNotifier)
	if !ok {
		t.Log("backend is no LossNotifier: Hold learns of loss through Renew")
		return
	}
	key := s.key(t)
	la := s.lock(t, a, key, s.long, rNotify)
	lost := n.Lost(la)
	if lost == nil {
		t.Fatalf("%s: Lost returned nil for a held lease", rNotify)
	}
	select {
	case <-lost:
		t.Fatalf("%s: Lost is closed while the lease is held", rNotify)
	default:
	}
	s.unlock(t, a, la, rNotify)
	timer := time.NewTimer(s.op)
	defer timer.Stop()
	select {
	case <-lost:
	case <-timer.C:
		t.Fatalf("%s: Lost still open %v after Unlock", rNotify, s.op)
	}
	select {
	case <-n.Lost(la):
	case <-time.After(s.op):
		t.Fatalf("%s: Lost of a lease that is not held is not closed", rNotify)
	}
}
