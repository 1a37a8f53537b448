package etcdlock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/faultproxy"
	"github.com/stretchr/testify/require"
)

// stallLate bounds how long after its own deadline a call may return (after a
// bare waiter on its context saw the deadline pass, when the machine's load
// delayed that).
const stallLate = 100 * time.Millisecond

// TestStalledCallsReturnByTheirDeadlines (issue 28, item 2): the calls of one
// Locker share its batched reads and its LeaseKeepAlive streams: 30 Renews (of
// the ttl they hold: a refresh on a shared stream and a batched read; of a
// longer one: a read and a move; of a Lease the Locker did not record: a read, a
// refresh and a read), and 10 TryLocks and 10 Unlocks among them, start at once
// with deadlines from 50ms to 1.5s while the Locker's link stalls. Each returns by
// its own deadline (plus stallLate), whether it leads a batch, waits for one, or
// is in flight.
func TestStalledCallsReturnByTheirDeadlines(t *testing.T) {
	p, err := faultproxy.New(etcdSrv.Addr(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	l := newLocker(t, newClient(t, []string{p.Addr()}, nil), nil)
	other := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), nil)
	const leases, others, ttl = 30, 10, 10 * time.Second
	prefix := "stall-" + driver.NewToken()
	held := make([]distlock.Lease, leases+others)
	for i := range held {
		locker := l
		if i%leases%3 == 2 { // a Lease that l did not record
			locker = other
		}
		held[i], err = locker.TryLock(ctxFor(t, 5*time.Second), fmt.Sprintf("%s-%d", prefix, i), ttl)
		require.NoError(t, err)
	}
	// Warm up the shared keepalive stream and the batched reads.
	_, err = l.Renew(ctxFor(t, 5*time.Second), held[0], ttl)
	require.NoError(t, err)
	p.Stall()
	defer p.Heal()

	type result struct {
		what     string
		deadline time.Duration // or when a bare waiter saw ctx end, if later
		took     time.Duration
		err      error
	}
	n := leases + 2*others
	results := make([]result, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		d := 50*time.Millisecond + time.Duration(i)*(1450*time.Millisecond)/time.Duration(n-1)
		wg.Go(func() {
			ctx, cancel := context.WithDeadline(t.Context(), start.Add(d))
			defer cancel()
			// A bare waiter on ctx: when a loaded machine let it see ctx end.
			woke := make(chan time.Duration, 1)
			go func() { <-ctx.Done(); woke <- time.Since(start) }()
			var what string
			var err error
			switch {
			case i%5 == 1 && i/5 < others: // an Unlock of a lease not renewed
				what = "Unlock"
				err = l.Unlock(ctx, held[leases+i/5])
			case i%5 == 3 && i/5 < others:
				what = "TryLock"
				_, err = l.TryLock(ctx, fmt.Sprintf("%s-new-%d", prefix, i), ttl)
			default:
				lease, rttl := held[i%leases], ttl
				if i%leases%3 == 1 {
					rttl = 2 * ttl // a move
				}
				what = fmt.Sprintf("Renew(%v)", rttl)
				_, err = l.Renew(ctx, lease, rttl)
			}
			took := time.Since(start)
			results[i] = result{what, max(d, <-woke), took, err}
		})
	}
	wg.Wait()
	worst := time.Duration(-1 << 63)
	for i, r := range results {
		late := r.took - r.deadline
		worst = max(worst, late)
		require.Error(t, r.err, "call %d (%s) succeeded through a stalled link", i, r.what)
		require.LessOrEqual(t, late, stallLate, "call %d (%s, deadline %v) returned %v after its deadline: %v", i, r.what, r.deadline, late, r.err)
	}
	t.Logf("%d calls: the latest returned %v after its deadline", n, worst)
}
