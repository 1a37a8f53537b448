package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// testHoldUnderPartition: leases held with distlock.Hold through one Locker, with
// different ttls so that their renewals meet, lose their Context by their latest
// Expires when the client is partitioned, whatever the Locker's Renews do; and
// Release returns by its own ctx.
func (s *suite) testHoldUnderPartition(t *testing.T) {
	a := s.client(t)
	if a.Partition == nil {
		notRun(t, "Partition")
	}
	const n = 12
	base := max(s.ttl, 300*time.Millisecond)
	held := make([]*distlock.Held, n)
	for i := range held {
		ttl := base + time.Duration(i)*base/4
		lease := s.lock(t, a, s.key(t), ttl, rHold)
		held[i] = distlock.Hold(t.Context(), a, lease, &distlock.HoldOptions{TTL: ttl})
	}
	ended := make([]chan time.Time, n)
	for i, h := range held {
		ended[i] = make(chan time.Time, 1)
		context.AfterFunc(h.Context(), func() { ended[i] <- time.Now() })
	}
	heal := a.Partition()
	defer heal()
	for i, h := range held {
		var end time.Time
		select {
		case end = <-ended[i]:
		case <-time.After(time.Until(h.Lease().Expires) + s.ctxBound):
			end = time.Now()
		}
		if late := end.Sub(h.Lease().Expires); h.Context().Err() == nil || late > s.ctxBound {
			t.Fatalf("%s: Held %d's Context ended %v after its lease's Expires while the client was partitioned (allowance %v; Context err %v)",
				rHold, i, late, s.ctxBound, h.Context().Err())
		}
		if cause := context.Cause(h.Context()); !errors.Is(cause, distlock.ErrNotHeld) {
			t.Fatalf("%s: Held %d's Context ended with cause %v, want one wrapping ErrNotHeld", rHold, i, cause)
		}
	}
	for i, h := range held {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		start := time.Now()
		_ = h.Release(ctx)
		cancel()
		if took := time.Since(start); took > 50*time.Millisecond+s.ctxBound {
			t.Fatalf("%s: Release of Held %d with a 50ms context took %v while the client was partitioned", rHold, i, took)
		}
	}
}
