package redislock_test

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
)

// infoStat reads one counter of INFO stats.
func infoStat(t *testing.T, c *redis.Client, name string) int64 {
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

// TestRenewShared (issue 16, W5): concurrent Renews of many leases on one Locker
// (what distlock.Hold does with many leases) cost one command each, and share the
// server's reads (round trips): they go out pipelined.
func TestRenewShared(t *testing.T) {
	const leases, ttl = 1000, time.Minute
	l := newLocker(t, nil)
	raw := newClient(t, redisSrv)
	ctx := ctxT(t)
	held := make([]distlock.Lease, leases)
	prefix := testKey(t)
	for i := range held {
		var err error
		held[i], err = l.TryLock(ctx, prefix+"-"+strconv.Itoa(i), ttl)
		require.NoError(t, err)
	}
	renew := func(ctx context.Context) {
		var wg sync.WaitGroup
		for i := range held {
			wg.Go(func() {
				lease, err := l.Renew(ctx, held[i], ttl)
				require.NoError(t, err)
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
		cmds, reads := infoStat(t, raw, "total_commands_processed"), infoStat(t, raw, "total_reads_processed")
		renew(c.ctx)
		// Two INFO commands (one read each) are this test's own.
		cmds = infoStat(t, raw, "total_commands_processed") - cmds - 1
		reads = infoStat(t, raw, "total_reads_processed") - reads - 1
		t.Logf("ctx=%s: %d concurrent renewals: %.2f commands and %.3f server reads per renewal",
			c.name, leases, float64(cmds)/leases, float64(reads)/leases)
		// EVALSHA, and GET, PTTL, PEXPIRE in the script (and a few for the
		// connections go-redis may dial).
		require.LessOrEqual(t, float64(cmds)/leases, 4.05, "commands per renewal")
		require.Less(t, float64(reads)/leases, 0.5, "server reads per renewal")
	}
	// A batch whose scripts the server lost falls back to EVAL.
	require.NoError(t, raw.ScriptFlush(ctx).Err())
	renew(ctx)
	for _, lease := range held {
		require.NoError(t, l.Unlock(ctx, lease))
	}
}

// TestRenewSharedMixed: a batch of concurrent Renews on a Redis Cluster (the
// pipeline spans its masters) gives each lease its own answer: the released ones
// ErrNotHeld, the others a later Expires.
func TestRenewSharedMixed(t *testing.T) {
	const leases, ttl = 300, time.Minute
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	t.Cleanup(func() { _ = c.Close() })
	l := newLockerOn(t, c, nil)
	ctx := ctxT(t)
	held := make([]distlock.Lease, leases)
	prefix := testKey(t)
	for i := range held {
		var err error
		held[i], err = l.TryLock(ctx, prefix+"-"+strconv.Itoa(i), ttl)
		require.NoError(t, err)
		if i%3 == 0 {
			require.NoError(t, l.Unlock(ctx, held[i]))
		}
	}
	var wg sync.WaitGroup
	for i := range held {
		wg.Go(func() {
			lease, err := l.Renew(ctx, held[i], ttl)
			if i%3 == 0 {
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
