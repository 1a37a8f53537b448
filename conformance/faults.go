package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// testPartitionedHolder: a holder cut off from the server cannot renew; another client
// acquires only after the holder's Expires; after healing, the old holder's lease is
// dead and fences moved on.
func (s *suite) testPartitionedHolder(t *testing.T) {
	a, b := s.client(t), s.client(t)
	if a.Partition == nil {
		notRun(t, "Partition")
		return
	}
	key := s.key(t)
	ttl, bound := s.ttl, s.ttl+s.grace+s.op
	if s.h.Caps.SessionExpiry {
		ttl, bound = s.long, s.grace+2*s.op
	}
	la := s.lock(t, a, key, ttl, rMutex)
	heal := a.Partition()
	healed := false
	defer func() {
		if !healed {
			heal()
		}
	}()
	if next, err := a.Renew(s.opCtx(t), la, ttl); err == nil {
		t.Fatalf("%s: Renew through a partition succeeded (Expires %v from now)", rMutex, next.Remaining())
	}
	lb, _, ret, err := s.acquireWithin(t, b, key, s.long, bound)
	if err != nil {
		t.Fatalf("%s: a partitioned holder still blocks %q after %v: %v", rExpiry, key, bound, err)
	}
	if ret.Before(la.Expires) {
		t.Fatalf("%s: %q acquired %v before the partitioned holder's Expires", rMutex, key, la.Expires.Sub(ret))
	}
	heal()
	healed = true
	if err := s.renewDead(t, a, la); err != nil {
		t.Fatalf("%s: the partitioned holder's Renew after healing: %v", rOwner, err)
	}
	if lb.Fence <= la.Fence {
		t.Fatalf("%s: Fence %d after a partition is not above the old holder's %d", rFence, lb.Fence, la.Fence)
	}
	s.unlock(t, b, lb, rFence)
}

// testPausedServer: while the server is paused a Renew fails; after it resumes, either
// the old lease still holds or it is dead and another client holds the key — never
// both. Backends with per-lock ttl must have freed the key by then.
func (s *suite) testPausedServer(t *testing.T) {
	if s.h.Faults.PauseServer == nil {
		notRun(t, "PauseServer")
		return
	}
	a, b := s.client(t), s.client(t)
	key := s.key(t)
	la := s.lock(t, a, key, s.ttl, rMutex)
	resume := s.h.Faults.PauseServer(t)
	resumed := false
	defer func() {
		if !resumed {
			resume()
		}
	}()
	if next, err := a.Renew(s.opCtx(t), la, s.ttl); err == nil {
		t.Fatalf("%s: Renew against a paused server succeeded (Expires %v from now)", rMutex, next.Remaining())
	}
	sleepCtx(t.Context(), time.Until(la.Expires)+s.grace)
	resume()
	resumed = true
	lb, _, ret, err := s.acquireWithin(t, b, key, s.long, s.grace+3*s.op)
	switch {
	case err == nil:
		if ret.Before(la.Expires) {
			t.Fatalf("%s: %q acquired before the holder's Expires", rMutex, key)
		}
		if lb.Fence <= la.Fence {
			t.Fatalf("%s: Fence %d after a pause is not above the old holder's %d", rFence, lb.Fence, la.Fence)
		}
		if err := s.renewDead(t, a, la); err != nil {
			t.Fatalf("%s: the old holder's Renew after the pause, while another client holds the key: %v", rOwner, err)
		}
		s.unlock(t, b, lb, rMutex)
	case s.h.Caps.SessionExpiry && errors.Is(err, distlock.ErrLocked):
		// The session outlived the pause (a resumed server gives it a full
		// timeout), so the holder's node may still be there; but its Expires has
		// passed, so its Renew must be refused (a lease never comes back), and the
		// key must free once the holder's backend lets the lapsed lease go.
		if _, err := a.Renew(s.opCtx(t), la, s.ttl); !errors.Is(err, distlock.ErrNotHeld) {
			t.Fatalf("%s: Renew of a lease whose Expires passed during the pause: got %v, want ErrNotHeld", rOwner, err)
		}
		lb, _, _, err := s.acquireWithin(t, b, key, s.long, s.grace+3*s.op)
		if err != nil {
			t.Fatalf("%s: key %q not free %v after its holder's lease lapsed during a pause: %v", rExpiry, key, s.grace+3*s.op, err)
		}
		s.unlock(t, b, lb, rMutex)
	default:
		t.Fatalf("%s: key %q not free %v after the server resumed past the holder's ttl: %v", rExpiry, key, s.grace+3*s.op, err)
	}
}

// testRestartedServer: a lease taken before a restart of the server(s) stays exclusive
// until its Expires and its holder can still renew and unlock it, and fences keep
// increasing — unless the backend declares RestartLosesLocks, when the suite only
// checks that it answers again.
func (s *suite) testRestartedServer(t *testing.T) {
	if s.h.Faults.RestartServer == nil {
		notRun(t, "RestartServer")
		return
	}
	a, b := s.client(t), s.client(t)
	key := s.key(t)
	la := s.lock(t, a, key, s.long, rMutex)
	s.h.Faults.RestartServer(t)
	var (
		lb  distlock.Lease
		ret time.Time
		err error
	)
	eventually(t.Context(), s.faultTimeout, func() bool {
		lb, err = b.TryLock(s.opCtx(t), key, s.long)
		ret = time.Now()
		return err == nil || errors.Is(err, distlock.ErrLocked)
	})
	switch {
	case err == nil && s.h.Caps.RestartLosesLocks:
		t.Logf("the backend declares RestartLosesLocks: %q was free after the restart", key)
		s.unlock(t, b, lb, rMutex)
	case err == nil && ret.Before(la.Expires):
		_ = b.Unlock(s.opCtx(t), lb)
		t.Fatalf("%s: %q acquired after a server restart while the lease taken before it had %v left; a backend that loses locks on restart must declare Capabilities.RestartLosesLocks and say so in its documentation",
			rMutex, key, la.Expires.Sub(ret))
	case err == nil:
		if lb.Fence <= la.Fence {
			t.Fatalf("%s: Fence %d after a server restart is not above the fence %d issued before it", rFence, lb.Fence, la.Fence)
		}
		s.unlock(t, b, lb, rMutex)
	case errors.Is(err, distlock.ErrLocked):
		if la.Remaining() > 0 {
			var next distlock.Lease
			ok := eventually(t.Context(), s.faultTimeout, func() bool {
				next, err = a.Renew(s.opCtx(t), la, s.long)
				return err == nil || errors.Is(err, distlock.ErrNotHeld)
			})
			if !ok || err != nil {
				t.Fatalf("%s: after a restart the key is locked but its holder cannot renew: %v", rMutex, err)
			}
			la = next
		} // else the backend granted less than s.long (a session's cap), and it ran out
		if err := a.Unlock(s.opCtx(t), la); err != nil && !errors.Is(err, distlock.ErrNotHeld) {
			t.Fatalf("%s: Unlock of the lease taken before a restart: %v", rMutex, err)
		}
		lc, _, _, err := s.acquireWithin(t, b, key, s.long, s.faultTimeout)
		if err != nil {
			t.Fatalf("%s: the key stays locked after its holder gave it back: %v", rExpiry, err)
		}
		if lc.Fence <= la.Fence && !s.h.Caps.RestartLosesLocks {
			t.Fatalf("%s: Fence %d after a server restart is not above the fence %d issued before it", rFence, lc.Fence, la.Fence)
		}
		s.unlock(t, b, lc, rFence)
	default:
		t.Fatalf("%s: the server does not answer %v after a restart: %v", rHarness, s.faultTimeout, err)
	}
}
