package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// lapse makes a's lease la stop being held while a can still talk to the server, and
// returns once client b holds the key instead, with b's lease. For ttl backends it
// waits out the ttl; for session backends it partitions a until b acquires.
func (s *suite) lapse(t *testing.T, a, b Client, la distlock.Lease) (distlock.Lease, bool) {
	t.Helper()
	if s.h.Caps.SessionExpiry {
		if a.Partition == nil {
			notRun(t, "Partition (needed to expire a session holder that is still alive)")
			return distlock.Lease{}, false
		}
		heal := a.Partition()
		lb, _, ret, err := s.acquireWithin(t, b, la.Key, s.long, s.grace+2*s.op)
		heal()
		if err != nil {
			t.Fatalf("%s: a partitioned session holder still blocks %q after the session timeout + grace %v: %v", rExpiry, la.Key, s.grace, err)
		}
		if ret.Before(la.Expires) {
			t.Fatalf("%s: %q acquired %v before the partitioned holder's Expires", rMutex, la.Key, la.Expires.Sub(ret))
		}
		return lb, true
	}
	sleepCtx(t.Context(), time.Until(la.Expires)+s.grace)
	if err := s.renewDead(t, a, la); err != nil {
		t.Fatalf("%s: Renew of a lease whose ttl lapsed, while the key is free: %v", rOwner, err)
	}
	lb, _, ret, err := s.acquireWithin(t, b, la.Key, s.long, s.op)
	if err != nil {
		t.Fatalf("%s: %q still held %v after an unrenewed lease's ttl + grace: %v", rExpiry, la.Key, time.Since(la.Expires), err)
	}
	if ret.Before(la.Expires) {
		t.Fatalf("%s: %q acquired %v before the holder's Expires", rMutex, la.Key, la.Expires.Sub(ret))
	}
	return lb, true
}

// unlockDead is Unlock of a lease that is no longer held, retried for a bounded
// time while it fails with a transport error (a session client still reconnecting
// after a partition); it returns the last error.
func (s *suite) unlockDead(t *testing.T, l distlock.Locker, lease distlock.Lease) error {
	t.Helper()
	var err error
	eventually(t.Context(), 3*s.op, func() bool {
		err = l.Unlock(s.opCtx(t), lease)
		return err == nil || errors.Is(err, distlock.ErrNotHeld) || errors.Is(err, distlock.ErrInvalid)
	})
	return err
}

// renewDead checks that Renew of a lease that is no longer held gives ErrNotHeld and
// does not revive it. Transport errors from a client that is reconnecting are retried
// for a bounded time.
func (s *suite) renewDead(t *testing.T, l distlock.Locker, lease distlock.Lease) error {
	t.Helper()
	var err error
	eventually(t.Context(), 3*s.op, func() bool {
		var next distlock.Lease
		next, err = l.Renew(s.opCtx(t), lease, s.long)
		if err == nil {
			_ = l.Unlock(s.opCtx(t), next)
			err = errors.New("Renew succeeded: it revived a lease that was not held")
			return true
		}
		if errors.Is(err, distlock.ErrNotHeld) {
			err = nil
			return true
		}
		return false // transport error: the client may be reconnecting
	})
	return err
}

// testStaleHolder: A's lease lapses, B acquires; A's Renew and Unlock return
// ErrNotHeld and B still holds.
func (s *suite) testStaleHolder(t *testing.T) {
	a, b, c := s.client(t), s.client(t), s.client(t)
	key := s.key(t)
	la := s.lock(t, a, key, s.ttl, rMutex)
	lb, ok := s.lapse(t, a, b, la)
	if !ok {
		return
	}
	if err := s.renewDead(t, a, la); err != nil {
		t.Fatalf("%s: the stale holder's Renew after another client acquired: %v", rOwner, err)
	}
	expectNotHeld(t, s.unlockDead(t, a, la), rOwner, "the stale holder's Unlock after another client acquired")
	s.expectLocked(t, c, key, rOwner, "after the stale holder's Renew and Unlock (they must not release the new holder)")
	lb2, err := b.Renew(s.opCtx(t), lb, s.long)
	if err != nil {
		t.Fatalf("%s: the new holder's Renew after the stale holder's Unlock: %v", rOwner, err)
	}
	if lb.Fence <= la.Fence {
		t.Fatalf("%s: the new holder's Fence %d is not above the stale holder's %d", rFence, lb.Fence, la.Fence)
	}
	s.unlock(t, b, lb2, rOwner)
}

// testReleasedLeaseIsDead: after Unlock the old lease can neither renew nor unlock,
// even when another client holds the key.
func (s *suite) testReleasedLeaseIsDead(t *testing.T) {
	a, b, c := s.client(t), s.client(t), s.client(t)
	key := s.key(t)
	la := s.lock(t, a, key, s.long, rOwner)
	s.unlock(t, a, la, rOwner)
	expectNotHeld(t, a.Unlock(s.opCtx(t), la), rOwner, "second Unlock of one lease")
	if err := s.renewDead(t, a, la); err != nil {
		t.Fatalf("%s: Renew of an unlocked lease: %v", rOwner, err)
	}
	lb := s.lock(t, b, key, s.long, rOwner)
	expectNotHeld(t, a.Unlock(s.opCtx(t), la), rOwner, "Unlock of an old lease while another client holds the key")
	if _, err := a.Renew(s.opCtx(t), la, s.long); !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("%s: Renew of an old lease while another client holds the key: got %v, want ErrNotHeld", rOwner, err)
	}
	s.expectLocked(t, c, key, rOwner, "after an old lease's Unlock and Renew")
	s.unlock(t, b, lb, rOwner)
}

// testForgedLease: leases with another token, another key or no token change nothing.
func (s *suite) testForgedLease(t *testing.T) {
	a, b, c := s.client(t), s.client(t), s.client(t)
	k1, k2 := s.key(t), s.key(t)
	la := s.lock(t, a, k1, s.long, rOwner)
	lb := s.lock(t, b, k2, s.long, rOwner)
	flip := []byte(la.Token)
	flip[len(flip)-1] ^= 1
	forged := map[string]distlock.Lease{
		"a fresh random token":            {Key: k1, Token: driver.NewToken(), Fence: la.Fence, Expires: la.Expires},
		"the holder's token, one bit off": {Key: k1, Token: string(flip), Fence: la.Fence, Expires: la.Expires},
		"the holder's token plus a byte":  {Key: k1, Token: la.Token + "x", Fence: la.Fence, Expires: la.Expires},
		"the holder's token less a byte":  {Key: k1, Token: la.Token[:len(la.Token)-1], Fence: la.Fence, Expires: la.Expires},
		"another key's holder's token":    {Key: k1, Token: lb.Token, Fence: lb.Fence, Expires: lb.Expires},
		"this token on another key":       {Key: k2, Token: la.Token, Fence: la.Fence, Expires: la.Expires},
	}
	for what, f := range forged {
		for _, l := range []distlock.Locker{a, c} {
			if _, err := l.Renew(s.opCtx(t), f, s.long); !errors.Is(err, distlock.ErrNotHeld) && !errors.Is(err, distlock.ErrInvalid) {
				t.Fatalf("%s: Renew of a forged lease (%s): got %v, want ErrNotHeld or ErrInvalid", rOwner, what, err)
			}
			if err := l.Unlock(s.opCtx(t), f); !errors.Is(err, distlock.ErrNotHeld) && !errors.Is(err, distlock.ErrInvalid) {
				t.Fatalf("%s: Unlock of a forged lease (%s): got %v, want ErrNotHeld or ErrInvalid", rOwner, what, err)
			}
		}
	}
	for _, zero := range []distlock.Lease{{}, {Key: k1}, {Key: k1, Fence: la.Fence, Expires: la.Expires}} {
		if _, err := a.Renew(s.opCtx(t), zero, s.long); !errors.Is(err, distlock.ErrInvalid) {
			t.Fatalf("%s: Renew of a lease without a token %+v: got %v, want ErrInvalid", rInput, zero, err)
		}
		if err := a.Unlock(s.opCtx(t), zero); !errors.Is(err, distlock.ErrInvalid) {
			t.Fatalf("%s: Unlock of a lease without a token %+v: got %v, want ErrInvalid", rInput, zero, err)
		}
	}
	s.expectLocked(t, c, k1, rOwner, "after forged Renew and Unlock calls")
	s.expectLocked(t, c, k2, rOwner, "after forged Renew and Unlock calls")
	if _, err := a.Renew(s.opCtx(t), la, s.long); err != nil {
		t.Fatalf("%s: the real holder's Renew after forged calls: %v", rOwner, err)
	}
	s.unlock(t, a, la, rOwner)
	s.unlock(t, b, lb, rOwner)
}
