package redislock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redislock"
)

// countingLocker counts the TryLocks and the Waits that distlock.Lock makes.
type countingLocker struct {
	*redislock.Locker
	tries, waits *atomic.Int64
}

func (c countingLocker) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	c.tries.Add(1)
	return c.Locker.TryLock(ctx, key, ttl)
}

func (c countingLocker) Wait(ctx context.Context, key string) error {
	c.waits.Add(1)
	return c.Locker.Wait(ctx, key)
}

// TestNoHerd (issue 16, W4): 1,000 waiters on one key across 4 Lockers, each taking
// the key once and releasing it at once. A release wakes one Wait per Locker, not
// every waiter: the TryLocks per release stay O(Lockers), not O(waiters).
func TestNoHerd(t *testing.T) {
	waiters := 1000
	if testing.Short() {
		waiters = 200
	}
	t.Run("server", func(t *testing.T) {
		testNoHerd(t, waiters, func() redis.UniversalClient { return newClient(t, redisSrv) })
	})
	t.Run("cluster", func(t *testing.T) {
		testNoHerd(t, waiters/5, func() redis.UniversalClient {
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
			t.Cleanup(func() { _ = c.Close() })
			return c
		})
	})
}

func testNoHerd(t *testing.T, waiters int, client func() redis.UniversalClient) {
	const lockers, ttl = 4, time.Minute
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	key := testKey(t)
	var tries, waits atomic.Int64
	ls := make([]countingLocker, lockers)
	for i := range ls {
		ls[i] = countingLocker{newLockerOn(t, client(), nil), &tries, &waits}
	}
	first, err := ls[0].Locker.TryLock(ctx, key, ttl)
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, waiters)
	for i := range waiters {
		wg.Go(func() {
			l := ls[i%lockers]
			lease, err := distlock.Lock(ctx, l, key, ttl, &distlock.LockOptions{MaxWait: time.Minute})
			if err == nil {
				err = l.Unlock(ctx, lease)
			}
			errs <- err
		})
	}
	// Every waiter made its first attempt and waits.
	require.Eventually(t, func() bool { return waits.Load() >= int64(waiters) }, time.Minute, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	before := tries.Load()
	start := time.Now()
	require.NoError(t, ls[0].Locker.Unlock(ctx, first))
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	releases := float64(waiters) // the first holder's and every waiter's but the last
	perRelease := float64(tries.Load()-before) / releases
	t.Logf("%d waiters on %d Lockers: %.2f TryLocks and %.2f Waits per release, %v per handoff",
		waiters, lockers, perRelease, float64(waits.Load()-int64(waiters))/releases, time.Since(start)/time.Duration(waiters))
	require.LessOrEqual(t, perRelease, 12.0, "TryLocks per release")
}
