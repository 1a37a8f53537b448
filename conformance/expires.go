package conformance

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// testExpiresBeforeRequest: Expires is no later than the request's start + ttl, and
// not already past.
func (s *suite) testExpiresBeforeRequest(t *testing.T) {
	a := s.client(t)
	for range 5 {
		key := s.key(t)
		start := time.Now()
		la := s.lock(t, a, key, s.long, rLease)
		returned := time.Now()
		if excess, late := expiresLate(start, returned, la.Expires, s.long); late {
			t.Fatalf("%s: Expires is %v after the request's start + ttl (round trip %v): it must be computed from a time taken before the request was sent", rLease, excess, returned.Sub(start))
		}
		if !la.Expires.After(returned) {
			t.Fatalf("%s: TryLock returned a lease that had already expired", rLease)
		}
		s.unlock(t, a, la, rLease)
	}
}

// testExpiresDelayedReply: with real latency on the wire, Expires still counts from
// before the request.
func (s *suite) testExpiresDelayedReply(t *testing.T) {
	a := s.client(t)
	if a.Delay == nil {
		notRun(t, "Delay")
		return
	}
	key := s.key(t)
	d := 100 * time.Millisecond
	restore := a.Delay(d)
	start := time.Now()
	la := s.lock(t, a, key, s.long, rLease)
	restore()
	if excess := la.Expires.Sub(start.Add(s.long)); excess > d/2 {
		t.Fatalf("%s: with %v of latency each way, Expires is %v after the request's start + ttl: it must be computed from a time taken before the request was sent", rLease, d, excess)
	}
	s.unlock(t, a, la, rLease)
}

// testReplyAfterTTL: when the round trip outlasts the ttl, TryLock and Renew must not
// return a lease that has already expired: they return an error (not ErrLocked), and a
// TryLock's half-made lock does not outlive its ttl.
func (s *suite) testReplyAfterTTL(t *testing.T) {
	a, b := s.client(t), s.client(t)
	if a.Delay == nil {
		notRun(t, "Delay")
		return
	}
	ttl := s.ttl
	d := ttl * 3 / 4 // a round trip of 1.5 ttl
	held := s.lock(t, a, s.key(t), s.long, rLease)
	key := s.key(t)
	restore := a.Delay(d)
	ctx, cancel := context.WithTimeout(t.Context(), 4*d+s.op)
	lease, err := a.TryLock(ctx, key, ttl)
	cancel()
	switch {
	case err == nil && !lease.Expires.After(time.Now()):
		restore()
		t.Fatalf("%s: TryLock with a round trip of about %v returned a lease with ttl %v that had already expired (%v ago)", rLease, 2*d, ttl, -lease.Remaining())
	case err == nil:
		t.Logf("TryLock returned a live lease despite %v of latency each way", d)
	case errors.Is(err, distlock.ErrLocked):
		restore()
		t.Fatalf("%s: TryLock of a free key whose reply came after its ttl returned ErrLocked: %v", rErrors, err)
	}
	ctx, cancel = context.WithTimeout(t.Context(), 4*d+s.op)
	next, rerr := a.Renew(ctx, held, ttl)
	cancel()
	restore()
	if rerr == nil && !next.Expires.After(time.Now()) {
		t.Fatalf("%s: Renew with a round trip of about %v returned a lease with ttl %v that had already expired (%v ago)", rLease, 2*d, ttl, -next.Remaining())
	}
	if rerr == nil {
		held = next
	}
	if err == nil {
		_ = a.Unlock(s.opCtx(t), lease)
	}
	if !s.h.Caps.SessionExpiry {
		lb, _, _, err := s.acquireWithin(t, b, key, s.long, ttl+s.grace+s.op)
		if err != nil {
			t.Fatalf("%s: %q still locked after a TryLock whose reply came after its ttl: %v", rErrors, key, err)
		}
		s.unlock(t, b, lb, rErrors)
	}
	if err := a.Unlock(s.opCtx(t), held); err != nil && !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("%s: Unlock after a slow Renew: %v", rOwner, err)
	}
}

// testShorteningRenewLostReply: a Renew that asks for less time than the lease has
// left, and whose reply is lost, must leave the old Expires a valid bound: another
// client stays locked out after the short ttl ran out on the server. (A Renew never
// shortens what the server holds; see distlock.Locker.)
func (s *suite) testShorteningRenewLostReply(t *testing.T) {
	if s.h.Caps.SessionExpiry {
		t.Skip("not applicable: a session backend's keys are freed by session expiry, not by a ttl that a Renew could shorten")
	}
	a, b := s.client(t), s.client(t)
	if a.Delay == nil {
		notRun(t, "Delay")
		return
	}
	short := s.ttl
	d := max(10*time.Millisecond, short/4) // a whole Renew fits in the short ttl
	type lostReply struct {
		lease distlock.Lease
		start time.Time
	}
	var lost []lostReply
	// Cut the Renew after its first, second and third reply, for backends whose
	// Renew takes several round trips, until one completes.
	for k := 1; k <= 3; k++ {
		key := s.key(t)
		la := s.lock(t, a, key, s.long, rMutex)
		restore := a.Delay(d)
		ctx, cancel := context.WithTimeout(t.Context(), time.Duration(2*k)*d-d/2)
		start := time.Now()
		next, err := a.Renew(ctx, la, short)
		cancel()
		restore()
		if err == nil {
			if err := a.Unlock(s.opCtx(t), next); err != nil && next.Remaining() > 0 {
				t.Fatalf("%s: Unlock of a lease renewed with ttl %v: %v", rOwner, short, err)
			}
			break
		}
		lost = append(lost, lostReply{la, start})
	}
	if len(lost) == 0 {
		t.Logf("every Renew returned within %v: no reply was lost", d+d/2)
		return
	}
	last := lost[len(lost)-1].start
	sleepCtx(t.Context(), time.Until(last.Add(short+s.grace)))
	for _, r := range lost {
		if r.lease.Remaining() <= 0 {
			t.Fatalf("%s: the test ran past the lease's Expires", rHarness)
		}
		s.expectLocked(t, b, r.lease.Key, rMutex, fmt.Sprintf(
			"%v after a Renew with ttl %v whose reply was lost, while the holder's Expires is %v ahead: a Renew must never shorten what the server holds",
			time.Since(r.start), short, r.lease.Remaining()))
		if err := a.Unlock(s.opCtx(t), r.lease); err != nil {
			t.Fatalf("%s: Unlock of a lease whose shortening Renew lost its reply: %v", rOwner, err)
		}
	}
}
