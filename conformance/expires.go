package conformance

import (
	"testing"
	"time"
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
	if s.h.Faults.Delay == nil {
		notRun(t, "Delay")
		return
	}
	a := s.client(t)
	key := s.key(t)
	d := 100 * time.Millisecond
	restore := s.h.Faults.Delay(t, a, d)
	start := time.Now()
	la := s.lock(t, a, key, s.long, rLease)
	restore()
	if excess := la.Expires.Sub(start.Add(s.long)); excess > d/2 {
		t.Fatalf("%s: with %v of latency each way, Expires is %v after the request's start + ttl: it must be computed from a time taken before the request was sent", rLease, d, excess)
	}
	s.unlock(t, a, la, rLease)
}
