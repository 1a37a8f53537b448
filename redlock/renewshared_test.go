package redlock_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redlock"
)

// infoStat reads one counter of INFO stats from c.
func infoStat(t *testing.T, c redis.UniversalClient, name string) int64 {
	t.Helper()
	s, err := c.Info(t.Context(), "stats").Result()
	require.NoError(t, err)
	for line := range strings.SplitSeq(s, "\r\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no %s in INFO stats", name)
	return 0
}

// sharedOpts gives the renewals of the shared-renewal tests a node timeout that
// -race on a loaded machine keeps: they count round trips and check each lease's
// result, not timeouts (1,000 renewals are one pipeline of 1,000 scripts per node).
var sharedOpts = &redlock.Options{NodeTimeout: 5 * time.Second}

// holdMany takes n leases of ttl on keys prefix-0 ... prefix-(n-1), a few at a time.
func holdMany(t *testing.T, l interface {
	TryLock(context.Context, string, time.Duration) (distlock.Lease, error)
}, prefix string, n int, ttl time.Duration) []distlock.Lease {
	t.Helper()
	held := make([]distlock.Lease, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range held {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			var err error
			held[i], err = l.TryLock(t.Context(), prefix+"-"+strconv.Itoa(i), ttl)
			require.NoError(t, err)
		})
	}
	wg.Wait()
	return held
}

// TestRenewShared (issue 16, W5): concurrent Renews of many leases on one Locker
// (what distlock.Hold does with many leases) share each master's reads (round
// trips): they go out pipelined, one batch per master.
func TestRenewShared(t *testing.T) {
	const leases, ttl = 1000, time.Minute
	l := newLocker(t, sharedOpts)
	raws := clients(t, nodeAddrs())
	ctx := t.Context()
	held := holdMany(t, l, t.Name(), leases, ttl)
	renew := func(ctx context.Context) {
		var wg sync.WaitGroup
		for i := range held {
			wg.Go(func() {
				lease, err := l.Renew(ctx, held[i], ttl)
				require.NoError(t, err)
				require.False(t, lease.Expires.Before(held[i].Expires))
				held[i] = lease
			})
		}
		wg.Wait()
	}
	renew(ctx) // warm up: scripts loaded, connections dialled
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"background", context.Background()}, {"cancelable", ctx}} {
		reads := make([]int64, len(raws))
		for i, raw := range raws {
			reads[i] = infoStat(t, raw, "total_reads_processed")
		}
		renew(c.ctx)
		for i, raw := range raws {
			// The two INFO commands (one read each) are this test's own.
			r := infoStat(t, raw, "total_reads_processed") - reads[i] - 1
			t.Logf("ctx=%s: master %d: %d concurrent renewals: %.3f server reads per renewal",
				c.name, i, leases, float64(r)/leases)
			require.Less(t, float64(r)/leases, 0.5, "server reads per renewal on master %d", i)
		}
	}
	// A batch whose scripts a master lost falls back to EVAL.
	require.NoError(t, raws[0].ScriptFlush(ctx).Err())
	renew(ctx)
	for _, lease := range held {
		require.NoError(t, l.Unlock(ctx, lease))
	}
}

// TestRenewSharedMixed: in one batch of concurrent Renews, each lease gets the
// result of its own locks on each master: a lease that lost its lock on two of the
// five masters is still renewed (quorum 3), one that lost it on three is not held.
func TestRenewSharedMixed(t *testing.T) {
	const leases, ttl = 300, time.Minute
	l := newLocker(t, sharedOpts)
	raws := clients(t, nodeAddrs())
	ctx := t.Context()
	held := holdMany(t, l, t.Name(), leases, ttl)
	lost := func(i int) int { return []int{0, 2, 3}[i%3] } // masters whose lock is gone
	for i, lease := range held {
		for m := range lost(i) {
			require.NoError(t, raws[(i+m)%len(raws)].Del(ctx, lockName(lease.Key)).Err())
		}
	}
	var wg sync.WaitGroup
	for i := range held {
		wg.Go(func() {
			lease, err := l.Renew(ctx, held[i], ttl)
			if lost(i) == 3 {
				require.ErrorIs(t, err, distlock.ErrNotHeld, "lease %d", i)
				return
			}
			require.NoError(t, err, "lease %d", i)
			require.True(t, lease.Expires.After(held[i].Expires), "lease %d", i)
			require.NoError(t, l.Unlock(ctx, lease))
		})
	}
	wg.Wait()
}
