package redlock_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/redlock"
)

// evalCalls reads how many EVALSHA and EVAL commands c's server has run.
func evalCalls(t *testing.T, c redis.UniversalClient) int64 {
	t.Helper()
	s, err := c.Info(t.Context(), "commandstats").Result()
	require.NoError(t, err)
	var n int64
	for line := range strings.SplitSeq(s, "\r\n") {
		for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
			if v, ok := strings.CutPrefix(line, cmd); ok {
				v, _, _ = strings.Cut(v, ",")
				k, err := strconv.ParseInt(v, 10, 64)
				require.NoError(t, err)
				n += k
			}
		}
	}
	return n
}

// TestRenewSlowMasters (W5): many concurrent Renews of one Locker while every
// master is slow (stopped, then continued) cost one goroutine each, their
// callers', not one per renewal and master waiting in a queue (five per renewal
// before: what the W5 cell's heap and goroutines per lease grew with on a loaded
// machine); once the masters answer, each runs a few renewal scripts (one call
// per batch, not one per renewal); and each Renew allocates about 32 times, its
// test goroutine included (190 before).
func TestRenewSlowMasters(t *testing.T) {
	const leases, ttl = 400, time.Minute
	l := newLocker(t, &redlock.Options{NodeTimeout: 10 * time.Second})
	raws := clients(t, nodeAddrs())
	gStart := runtime.NumGoroutine()
	held := holdMany(t, l, t.Name(), leases, ttl)
	renewAll := func(started *atomic.Int64) {
		var wg sync.WaitGroup
		for i := range held {
			wg.Go(func() {
				started.Add(1)
				lease, err := l.Renew(context.Background(), held[i], ttl)
				require.NoError(t, err, "lease %d", i)
				held[i] = lease
			})
		}
		wg.Wait()
	}
	renewAll(new(atomic.Int64)) // warm up: scripts loaded, connections dialled
	calls := make([]int64, len(raws))
	for i, raw := range raws {
		calls[i] = evalCalls(t, raw)
	}
	// The Locker's idle workers end after a while (redisx's workerIdle).
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= gStart+20 }, 30*time.Second, time.Millisecond)
	g0 := runtime.NumGoroutine()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for _, s := range nodes {
		s.Pause(t)
	}
	var started atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		renewAll(&started)
	}()
	require.Eventually(t, func() bool { return started.Load() == leases }, 30*time.Second, time.Millisecond)
	// The Renews are under way; sample the goroutines for a while (the old code's
	// fan-outs start five each as they go).
	peak := runtime.NumGoroutine() - g0
	tick := time.NewTicker(5 * time.Millisecond)
	window := time.After(time.Second)
sample:
	for {
		select {
		case <-tick.C:
			peak = max(peak, runtime.NumGoroutine()-g0)
		case <-window:
			break sample
		}
	}
	tick.Stop()
	for _, s := range nodes {
		s.Resume(t)
	}
	<-done
	runtime.ReadMemStats(&m1)
	allocs := float64(m1.Mallocs-m0.Mallocs) / leases
	t.Logf("%d Renews in flight on stopped masters: %d goroutines more at the peak, %.1f allocations per Renew", leases, peak, allocs)
	require.Less(t, peak, leases+leases/2, "goroutines of %d Renews waiting for slow masters", leases)
	if !raceEnabled { // the race detector allocates more
		require.Less(t, allocs, 60.0, "allocations per Renew (the test's goroutine included)")
	}
	for i, raw := range raws {
		// INFO is no script: every call counted is a renewal's.
		n := evalCalls(t, raw) - calls[i]
		t.Logf("master %d: %d scripts for %d renewals", i, n, leases)
		require.Less(t, n, int64(leases/10), "renewal scripts on master %d", i)
	}
	for _, lease := range held {
		require.NoError(t, l.Unlock(t.Context(), lease))
	}
}

// TestRenewBatchAbandoned: a Renew whose context ends while it waits for the
// batch in flight returns its context's error at once, and the others of its
// batch are still renewed.
func TestRenewBatchAbandoned(t *testing.T) {
	const ttl = time.Minute
	l := newLocker(t, &redlock.Options{NodeTimeout: 10 * time.Second})
	held := holdMany(t, l, t.Name(), 3, ttl)
	for _, s := range nodes {
		s.Pause(t)
	}
	// The first Renew is the batch in flight; the next two wait for it.
	errs := make([]error, 3)
	var wg sync.WaitGroup
	wg.Go(func() { held[0], errs[0] = l.Renew(context.Background(), held[0], ttl) })
	ctx, cancel := context.WithCancel(t.Context())
	var startedWaiting atomic.Int64
	wg.Go(func() {
		startedWaiting.Add(1)
		_, errs[1] = l.Renew(ctx, held[1], ttl)
	})
	wg.Go(func() {
		startedWaiting.Add(1)
		held[2], errs[2] = l.Renew(context.Background(), held[2], ttl)
	})
	require.Eventually(t, func() bool { return startedWaiting.Load() == 2 }, 10*time.Second, time.Millisecond)
	cancel()
	for _, s := range nodes {
		s.Resume(t)
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], context.Canceled)
	require.NoError(t, errs[2])
	for _, lease := range held {
		require.NoError(t, l.Unlock(t.Context(), lease))
	}
}
