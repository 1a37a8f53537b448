// Package conformance proves a distlock backend against the distlock contract.
//
// A backend's test calls Run with a Harness that makes independent clients of the
// backend, states its capabilities and, optionally, injects faults:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Harness{
//			NewClient: func(t testing.TB) conformance.Client {
//				p := newProxy(t) // e.g. a faultproxy.Proxy in front of the server
//				l := mybackend.New(p.Addr())
//				return conformance.Client{
//					Locker:    l,
//					Partition: func() func() { p.Blackhole(); return p.Heal },
//				}
//			},
//			Caps: conformance.Capabilities{MaxKeyLen: 1024},
//		})
//	}
//
// A partition by Blackhole loses the bytes sent during it; for a client whose protocol
// keeps state across the messages of a connection (gRPC over HTTP/2), use Stall, which
// holds them and delivers them after heal, as TCP does.
//
// Run ends with a short Explore (its subtest "Explore"): seeded random schedules of
// many clients, leases and faults, checked against the contract; run it alone, and
// longer, with -run 'Conformance/Explore' -conformance.explore=60s, and replay a
// failure's schedule with -conformance.seed.
//
// Every rule of the contract (see distlock.Locker) is a subtest named after it, and
// every failure message starts with the rule it breaks, e.g. "rule 2 (owner check)".
// Optional interfaces (distlock.Waiter, Inspector, LossNotifier, LossWatcher) are found by type
// assertion and tested when present. Fault tests whose hook is nil are skipped with a
// NOT RUN message; they never pass silently.
//
// The faults model a real deployment: per client, a crash, a partition from the
// servers, latency, and the client's server cut off from its peers (IsolateServer);
// per cluster, a pause, a restart, a leader change and a minority that loses its
// data. The package's own tests run the suite against deliberately broken lockers
// (mutants), one for each of these faults among them, and check that each one fails
// it by the rule it breaks.
package conformance

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// Rule labels start every failure message.
const (
	rMutex   = "rule 1 (mutual exclusion)"
	rOwner   = "rule 2 (owner check)"
	rFence   = "rule 3 (fencing)"
	rExpiry  = "rule 4 (expiry)"
	rErrors  = "rule 5 (errors)"
	rContext = "rule 6 (context)"
	rInput   = "rule 7 (input)"
	rLease   = "Lease contract"
	rWaiter  = "Waiter contract"
	rInspect = "Inspector contract"
	rNotify  = "LossNotifier contract"
	rWatch   = "LossWatcher contract"
	rHold    = "Hold contract"
	rHarness = "harness"
)

// suite holds the resolved parameters of one Run.
type suite struct {
	h         Harness
	ttl       time.Duration // short ttl, for tests that let a lease lapse
	long      time.Duration // ttl that never lapses within a test
	grace     time.Duration
	op        time.Duration
	waitBound time.Duration
	// faultTimeout bounds recovery from a cluster fault.
	faultTimeout time.Duration
	// ctxBound is how long after its context's deadline a call may return.
	ctxBound time.Duration
}

// Run runs the whole suite against the backend h describes. It calls t.Run once per
// rule; see the package doc.
func Run(t *testing.T, h Harness) {
	t.Helper()
	s := newSuite(t, h)

	t.Run("Capabilities", s.testCapabilities)
	t.Run("Rule1_MutualExclusion", func(t *testing.T) {
		t.Run("TwoClients", s.testTwoClients)
		t.Run("NotReentrant", s.testNotReentrant)
		t.Run("Contention", s.testContention)
	})
	t.Run("Rule2_OwnerCheck", func(t *testing.T) {
		t.Run("StaleHolder", s.testStaleHolder)
		t.Run("ReleasedLeaseIsDead", s.testReleasedLeaseIsDead)
		t.Run("ForgedLease", s.testForgedLease)
	})
	t.Run("Rule3_Fencing", func(t *testing.T) {
		t.Run("IncreasingAcrossClients", s.testFenceIncreasing)
		t.Run("RenewKeepsIdentity", s.testRenewKeepsIdentity)
	})
	t.Run("Rule4_Expiry", func(t *testing.T) {
		t.Run("RenewExtends", s.testRenewExtends)
		t.Run("UnrenewedFrees", s.testUnrenewedFrees)
		t.Run("CrashedHolderFrees", s.testCrashedHolderFrees)
	})
	t.Run("Rule5_Errors", func(t *testing.T) {
		t.Run("DeadContextIsNotLocked", s.testDeadContextIsNotLocked)
		t.Run("PartitionIsNotLocked", s.testPartitionIsNotLocked)
		t.Run("AbandonedAttemptLeavesNoLock", s.testAbandonedAttempt)
	})
	t.Run("Rule6_Context", func(t *testing.T) {
		t.Run("CancelledBeforeCall", s.testCancelledBeforeCall)
		t.Run("ExpiringContexts", s.testExpiringContexts)
		t.Run("LockGivesUpWithJoinedError", s.testLockGivesUp)
		t.Run("DeadlinesUnderPartition", s.testDeadlinesUnderPartition)
	})
	t.Run("Rule7_Input", func(t *testing.T) {
		t.Run("BadArguments", s.testBadArguments)
		t.Run("LongestKey", s.testLongestKey)
		t.Run("DistinctKeys", s.testDistinctKeys)
	})
	t.Run("LeaseExpires", func(t *testing.T) {
		t.Run("BeforeRequest", s.testExpiresBeforeRequest)
		t.Run("DelayedReply", s.testExpiresDelayedReply)
		t.Run("ReplyAfterTTL", s.testReplyAfterTTL)
		t.Run("ShorteningRenewLostReply", s.testShorteningRenewLostReply)
		t.Run("RenewAfterExpires", s.testRenewAfterExpires)
	})
	t.Run("Waiter", s.testWaiter)
	t.Run("Inspector", s.testInspector)
	t.Run("LossNotifier", s.testLossNotifier)
	t.Run("LossWatcher", s.testLossWatcher)
	t.Run("OpError", s.testOpErrors)
	t.Run("Hold", func(t *testing.T) {
		t.Run("EndsByExpiresUnderPartition", s.testHoldUnderPartition)
	})
	t.Run("Faults", func(t *testing.T) {
		t.Run("PartitionedHolder", s.testPartitionedHolder)
		t.Run("PausedServer", s.testPausedServer)
		t.Run("RestartedServer", s.testRestartedServer)
		t.Run("IsolatedServer", s.testIsolatedServer)
		t.Run("LeaderChange", s.testLeaderChange)
		t.Run("MinorityLosesData", s.testMinorityLosesData)
		t.Run("CloseDuringPartition", s.testCloseDuringPartition)
		t.Run("CloseDuringPause", s.testCloseDuringPause)
	})
	t.Run("Explore", func(t *testing.T) { Explore(t, h, nil) })
}

// newSuite checks h and resolves its parameters.
func newSuite(t *testing.T, h Harness) *suite {
	t.Helper()
	s := &suite{h: h}
	if h.NewClient == nil {
		t.Fatalf("%s: Harness.NewClient is nil", rHarness)
	}
	c := h.Caps
	if c.MaxKeyLen != 0 && c.MaxKeyLen < 64 {
		t.Fatalf("%s: Capabilities.MaxKeyLen %d is below 64 bytes; the suite needs keys of 64 bytes", rHarness, c.MaxKeyLen)
	}
	s.ttl = max(c.MinTTL, 100*time.Millisecond)
	s.long = max(60*time.Second, 20*s.ttl)
	s.grace = orDefault(c.Grace, 250*time.Millisecond)
	s.op = orDefault(c.OpTimeout, 2*time.Second)
	s.waitBound = orDefault(c.WaitBound, 250*time.Millisecond)
	s.faultTimeout = orDefault(c.FaultTimeout, 10*time.Second)
	s.ctxBound = orDefault(c.CtxBound, 250*time.Millisecond)
	return s
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// client returns a new client of the backend.
func (s *suite) client(t *testing.T) Client {
	t.Helper()
	c := s.h.NewClient(t)
	if c.Locker == nil {
		t.Fatalf("%s: NewClient returned a Client with a nil Locker", rHarness)
	}
	if s.h.Caps.SessionExpiry && c.Crash == nil {
		t.Fatalf("%s: a backend with SessionExpiry must set Client.Crash, which ends a holder's session", rHarness)
	}
	return c
}

// key returns a key that no other test uses.
func (s *suite) key(t *testing.T) string {
	return "conformance-" + driver.NewToken()[:12]
}

// opCtx returns a context bounded by the suite's op timeout.
func (s *suite) opCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), s.op)
	t.Cleanup(cancel)
	return ctx
}

// lock acquires key for ttl or fails the test under rule.
func (s *suite) lock(t *testing.T, l distlock.Locker, key string, ttl time.Duration, rule string) distlock.Lease {
	t.Helper()
	lease, err := l.TryLock(s.opCtx(t), key, ttl)
	if err != nil {
		t.Fatalf("%s: TryLock(%s, %v) on a free key: %v", rule, short(key), ttl, err)
	}
	if lease.Key != key {
		t.Fatalf("%s: TryLock(%s) returned a Lease for key %s", rLease, short(key), short(lease.Key))
	}
	if len(lease.Token) < 16 {
		t.Fatalf("%s: Token %q is too short to carry 128 random bits", rLease, lease.Token)
	}
	return lease
}

// unlock releases lease or fails the test under rule.
func (s *suite) unlock(t *testing.T, l distlock.Locker, lease distlock.Lease, rule string) {
	t.Helper()
	if err := l.Unlock(s.opCtx(t), lease); err != nil {
		t.Fatalf("%s: Unlock of a held lease on %s: %v", rule, short(lease.Key), err)
	}
}

// expectLocked fails the test under rule unless TryLock of key by l gives ErrLocked.
func (s *suite) expectLocked(t *testing.T, l distlock.Locker, key string, rule, why string) {
	t.Helper()
	lease, err := l.TryLock(s.opCtx(t), key, s.long)
	if err == nil {
		_ = l.Unlock(s.opCtx(t), lease)
		t.Fatalf("%s: TryLock(%s) succeeded %s", rule, short(key), why)
	}
	if !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("%s: TryLock(%s) %s: got %v, want an error wrapping ErrLocked", rErrors, short(key), why, err)
	}
}

// expectNotHeld fails the test under rule unless err wraps ErrNotHeld.
func expectNotHeld(t *testing.T, err error, rule, what string) {
	t.Helper()
	if !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("%s: %s: got %v, want an error wrapping ErrNotHeld", rule, what, err)
	}
}

// acquireWithin polls TryLock of key by l until it succeeds or d passes. It returns
// the lease, the start of the successful attempt and the time it returned.
func (s *suite) acquireWithin(t *testing.T, l distlock.Locker, key string, ttl, d time.Duration) (lease distlock.Lease, attempt, returned time.Time, err error) {
	t.Helper()
	deadline := time.Now().Add(d)
	pause := min(max(s.ttl/20, 2*time.Millisecond), 20*time.Millisecond)
	for {
		attempt = time.Now()
		lease, err = l.TryLock(s.opCtx(t), key, ttl)
		returned = time.Now()
		if err == nil {
			return lease, attempt, returned, nil
		}
		if errors.Is(err, distlock.ErrInvalid) || time.Now().After(deadline) {
			return lease, attempt, returned, err
		}
		sleepCtx(t.Context(), pause)
	}
}

// eventually polls cond until it is true or d passes.
func eventually(ctx context.Context, d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		sleepCtx(ctx, 10*time.Millisecond)
	}
}

// sleepCtx sleeps for d or until ctx ends. The suite sleeps only to let a lease lapse
// or to pace polling, never to order events.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// notRun marks a fault test skipped because its hook is missing: it shows as SKIP,
// never as PASS.
func notRun(t *testing.T, hook string) {
	t.Helper()
	where := "Harness.Faults"
	switch hook {
	case "Crash", "Partition", "Delay", "IsolateServer":
		where = "Client"
	}
	t.Skipf("NOT RUN: %s.%s is nil; this fault is untested for this backend", where, hook)
}

// short quotes key for a message, cut to 48 bytes.
func short(key string) string {
	if len(key) > 48 {
		return fmt.Sprintf("%q...(%d bytes)", key[:48], len(key))
	}
	return fmt.Sprintf("%q", key)
}

// expiresLate reports how far Expires lies beyond a bound that a backend computing it
// from before the request meets: start + ttl, with a tolerance of half the call's
// round trip, and at least schedAllowance, for the caller's own work (and the
// scheduler) before the request is sent. A backend that computes Expires from the
// reply overshoots by the whole round trip; the DelayedReply fault test makes that
// round trip long enough to tell for any backend.
func expiresLate(start, returned, expires time.Time, ttl time.Duration) (time.Duration, bool) {
	excess := expires.Sub(start.Add(ttl))
	tolerance := max(returned.Sub(start)/2, schedAllowance)
	return excess, excess > tolerance
}

// schedAllowance absorbs a goroutine descheduled between the caller's clock reading
// and the backend's, on a loaded machine under -race.
const schedAllowance = 50 * time.Millisecond
