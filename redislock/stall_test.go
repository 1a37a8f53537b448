package redislock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/faultproxy"
	"github.com/distlock/distlock/redislock"
)

// stallLate bounds how long after its own deadline a call may return (after a
// bare waiter on its context saw the deadline pass, when the machine's load
// delayed that).
const stallLate = 100 * time.Millisecond

// pipeCounter is a go-redis hook that counts pipelines (RunShared's batches).
type pipeCounter struct{ n atomic.Int64 }

func (*pipeCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*pipeCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *pipeCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// TestStalledCallsReturnByTheirDeadlines (issue 28, item 2): many calls of one
// Locker share its queue (redisx.Node.RunShared) and its Group's workers: 30
// Renews, and 10 TryLocks and 10 Unlocks among them, start at once with deadlines
// from 50ms to 1.5s while the Locker's link stalls. Each returns by its own
// deadline (plus stallLate), whether it went alone, waited in the queue, or was in
// flight in a batch: with a read timeout of 150ms (and no retries) the calls in
// flight fail early and free their slots, so the queued calls go out as batches
// into the stalled link, and their callers leave them in flight.
func TestStalledCallsReturnByTheirDeadlines(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    redis.Options
		batches bool
	}{
		{"client defaults", redis.Options{}, false},
		{"batches in flight", redis.Options{ReadTimeout: 150 * time.Millisecond, MaxRetries: -1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := faultproxy.New(redisSrv.Addr(), nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Close() })
			opts := tc.opts
			opts.Addr = p.Addr()
			c := redis.NewClient(&opts)
			t.Cleanup(func() { _ = c.Close() })
			l := newLockerOn(t, c, nil)
			var pipes pipeCounter
			c.AddHook(&pipes)
			stallCalls(t, l, p)
			if tc.batches {
				require.Positive(t, pipes.n.Load(), "no batch was sent")
			}
		})
	}
}

// stallCalls runs the calls of TestStalledCallsReturnByTheirDeadlines on l, whose
// client goes through p.
func stallCalls(t *testing.T, l *redislock.Locker, p *faultproxy.Proxy) {
	const leases, others = 30, 10
	prefix := testKey(t)
	held := make([]distlock.Lease, leases+others)
	for i := range held {
		var err error
		held[i], err = l.TryLock(ctxT(t), fmt.Sprintf("%s-%d", prefix, i), time.Minute)
		require.NoError(t, err)
	}
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
			case i%3 == 1 && i/3 < others: // an Unlock of a lease not renewed
				what = "Unlock"
				err = l.Unlock(ctx, held[leases+i/3])
			case i%3 == 2 && i/3 < others:
				what = "TryLock"
				_, err = l.TryLock(ctx, fmt.Sprintf("%s-new-%d", prefix, i), time.Minute)
			default:
				what = "Renew"
				_, err = l.Renew(ctx, held[i%leases], time.Minute)
			}
			took := time.Since(start)
			results[i] = result{what, max(d, <-woke), took, err}
		})
	}
	var queued int
	for ok := true; ok; {
		queued = max(queued, redislock.SharedPending(l))
		ok = queued == 0 && time.Since(start) < 40*time.Millisecond
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	worst := time.Duration(-1 << 63)
	for i, r := range results {
		late := r.took - r.deadline
		worst = max(worst, late)
		require.Error(t, r.err, "call %d (%s) succeeded through a stalled link", i, r.what)
		require.LessOrEqual(t, late, stallLate, "call %d (%s, deadline %v) returned %v after its deadline: %v", i, r.what, r.deadline, late, r.err)
	}
	t.Logf("%d calls (%d queued at once): the latest returned %v after its deadline", n, queued, worst)
	require.Positive(t, queued, "no call waited in the queue")
}
