package conformance

import (
	"testing"
	"time"
)

// closer is a Locker's Close, which every backend has.
type closer interface{ Close() error }

// testCloseDuringPartition: a holder's Locker closed while it is cut off from the
// server leaves nothing behind: once the partition heals, the key is free by the
// lease's Expires + grace (session backends: by the session's end). A backend whose
// Close starts background clean-up (deleting its lock nodes, ending its sessions)
// must not give that up while the servers cannot be reached.
func (s *suite) testCloseDuringPartition(t *testing.T) {
	a := s.client(t)
	if a.Partition == nil {
		notRun(t, "Partition")
	}
	s.closeDuringOutage(t, a, func() func() { return a.Partition() }, false)
}

// testCloseDuringPause: the same while the server(s) are paused; the key is then
// free by ttl + grace after they resume (a paused server's clock, or a new leader,
// may give the lease its ttl again).
func (s *suite) testCloseDuringPause(t *testing.T) {
	if s.h.Faults.PauseServer == nil {
		notRun(t, "PauseServer")
	}
	a := s.client(t)
	s.closeDuringOutage(t, a, func() func() { return s.h.Faults.PauseServer(t) }, true)
}

func (s *suite) closeDuringOutage(t *testing.T, a Client, outage func() (end func()), paused bool) {
	c, ok := a.Locker.(closer)
	if !ok {
		t.Skip("the Locker has no Close method")
	}
	b := s.client(t)
	key := s.key(t)
	la := s.lock(t, a, key, s.ttl, rExpiry)
	began := time.Now()
	end := outage()
	ended := false
	defer func() {
		if !ended {
			end()
		}
	}()
	closed := make(chan error, 1)
	called := time.Now()
	go func() { closed <- c.Close() }()
	sleepCtx(t.Context(), time.Until(la.Expires)+s.ttl/2)
	end()
	ended = true
	healed := time.Now()
	select {
	case <-closed:
	case <-time.After(s.faultTimeout):
		t.Fatalf("%s: Close called during an outage had not returned %v after it (the outage ended %v after Close was called)",
			rHarness, time.Since(called), healed.Sub(called))
	}
	by := la.Expires.Add(s.grace)
	switch {
	case paused:
		by = healed.Add(s.ttl + s.grace)
	case s.h.Caps.SessionExpiry:
		// The server ends a partitioned client's session by its timeout plus
		// detection, as in PartitionedHolder.
		by = laterOf(by, began.Add(s.grace+2*s.op))
	}
	s.expectFreedBy(t, b, la, by)
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
