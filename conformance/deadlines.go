package conformance

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// testDeadlinesUnderPartition: many calls through one Locker, each with its own
// deadline, started together while the client is partitioned, each return by their
// own deadline. A backend that batches or shares a connection, a session or a queue
// between leases must not make a caller wait for another caller's deadline, whether
// it leads a batch, waits in a queue or is in flight. The bound (Capabilities.
// CtxBound) is far below the deadlines' spread, so a caller that waits for another
// caller's deadline (a batch led by the caller with the latest one) fails.
func (s *suite) testDeadlinesUnderPartition(t *testing.T) {
	a := s.client(t)
	if a.Partition == nil {
		notRun(t, "Partition")
	}
	const n = 24
	leases := make([]distlock.Lease, n)
	for i := range leases {
		leases[i] = s.lock(t, a, s.key(t), s.long, rContext)
	}
	heal := a.Partition()
	healed := false
	defer func() {
		if !healed {
			heal()
		}
	}()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		fails []string
	)
	begin := make(chan struct{})
	for i := range n {
		// Deadlines from 50ms to about 1s, interleaved so that neither the first
		// nor the last caller has the latest one; Renews to a longer, the same and
		// a shorter ttl, TryLocks of new keys and Unlocks share the Locker.
		d := 50*time.Millisecond + time.Duration((i*7)%n)*40*time.Millisecond
		what, call := s.deadlineCall(a, i, leases[i])
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-begin
			ctx, cancel := context.WithTimeout(t.Context(), d)
			defer cancel()
			start := time.Now()
			err := call(ctx)
			if took := time.Since(start); took > d+s.ctxBound {
				mu.Lock()
				fails = append(fails, fmt.Sprintf("%s with a %v deadline returned after %v (%v)", what, d, took, err))
				mu.Unlock()
			}
		}()
	}
	close(begin)
	wg.Wait()
	heal()
	healed = true
	for _, l := range leases {
		_ = a.Unlock(s.opCtx(t), l) // an Unlock under the partition may have released it already
	}
	if len(fails) > 0 {
		t.Fatalf("%s: %d of %d calls started together through one partitioned Locker overstayed their own deadline (+%v), among them: %v",
			rContext, len(fails), n, s.ctxBound, fails[:min(len(fails), 3)])
	}
}

// deadlineCall is the i-th call of testDeadlinesUnderPartition, on lease.
func (s *suite) deadlineCall(a Client, i int, lease distlock.Lease) (string, func(context.Context) error) {
	switch i % 5 {
	case 0, 1:
		return "Renew to a longer ttl", func(ctx context.Context) error {
			_, err := a.Renew(ctx, lease, 2*s.long)
			return err
		}
	case 2:
		return "Renew to a shorter ttl", func(ctx context.Context) error {
			_, err := a.Renew(ctx, lease, s.long/2)
			return err
		}
	case 3:
		return "TryLock of a free key", func(ctx context.Context) error {
			_, err := a.TryLock(ctx, "conformance-"+driver.NewToken()[:12], s.long)
			return err
		}
	default:
		return "Unlock", func(ctx context.Context) error { return a.Unlock(ctx, lease) }
	}
}
