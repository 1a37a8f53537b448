package redlock_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/redlock"
)

// Tests of the pub/sub connections of Wait (issue 13, case 3): one that a NAT or load
// balancer dropped without a word (a fault proxy blackholes it while new connections
// work), and one that breaks.

// tappedLocker returns a Locker over the five nodes whose clients dial every
// connection through a proxy of its own (see testenv.RedisTap), warmed up.
func tappedLocker(t *testing.T, opts *redlock.Options) (*redlock.Locker, *testenv.RedisTap) {
	t.Helper()
	tap := testenv.NewRedisTap(t)
	var cs []redis.UniversalClient
	for _, s := range nodes {
		// A short ReadTimeout: a command left waiting on a silenced connection
		// (which Close waits for) ends soon.
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), Dialer: tap.Dialer(), ReadTimeout: 500 * time.Millisecond})
		t.Cleanup(func() { _ = c.Close() })
		cs = append(cs, c)
	}
	l, err := redlock.New(cs, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	warmUp(t, l)
	return l, tap
}

// numSubAll returns the least number of subscribers of channel on any node (-1
// after an error, which fails t). It may run off the test's goroutine.
func numSubAll(t *testing.T, channel string) int64 {
	least := int64(-1)
	for i, s := range nodes {
		v, err := testenv.RedisCommand(t.Context(), s.Addr(), "PUBSUB", "NUMSUB", channel)
		a, _ := v.([]any)
		if err != nil || len(a) != 2 {
			t.Errorf("PUBSUB NUMSUB on node %d: %v, %v", i, v, err)
			return -1
		}
		n, _ := a[1].(int64)
		if least < 0 || n < least {
			least = n
		}
	}
	return least
}

// waitReturns waits for woke and returns how long after start it delivered,
// failing t unless it delivers nil within limit.
func waitReturns(t *testing.T, woke <-chan error, start time.Time, limit time.Duration, what string) time.Duration {
	t.Helper()
	select {
	case err := <-woke:
		require.NoError(t, err, what)
	case <-time.After(limit):
		t.Fatalf("Wait did not return within %v of %s", limit, what)
	}
	return time.Since(start)
}

// TestWaitDeadSubscription: when the pub/sub connections of a Locker's Waits go
// silent (their channel still subscribed, so a new Wait finds it confirmed), the
// hubs ping them, replace them and wake the Wait: a hand-off through distlock.Lock
// takes milliseconds after the Unlock, not the holder's ttl or Lock's MaxWait (5s).
func TestWaitDeadSubscription(t *testing.T) {
	b, tap := tappedLocker(t, redlock.WithHub(&redlock.Options{NodeTimeout: time.Second}, 100*time.Millisecond, 0, 0))
	a := newLocker(t, nil)
	key := "dead-sub-" + driver.NewToken()[:8]
	_, _, channel := redlock.Names(redlock.DefaultPrefix, key)
	// b's channel subscribed on every node, kept between Waits.
	require.NoError(t, b.Wait(t.Context(), key))
	require.Eventually(t, func() bool { return numSubAll(t, channel) == 1 }, 5*time.Second, time.Millisecond,
		"b's Wait to subscribe on every node")
	const ttl = 10 * time.Second
	la, err := a.TryLock(t.Context(), key, ttl)
	require.NoError(t, err)
	require.Equal(t, len(nodes), tap.SilencePubSub())
	got := make(chan error, 1)
	var lb distlock.Lease
	go func() {
		var err error
		lb, err = distlock.Lock(t.Context(), b, key, ttl, nil)
		got <- err
	}()
	// Hold the key a while: b's Lock waits on its silent connections meanwhile.
	hold := time.NewTimer(500 * time.Millisecond)
	defer hold.Stop()
	select {
	case err := <-got:
		t.Fatalf("Lock returned %v while the key was held", err)
	case <-hold.C:
	}
	unlocked := time.Now()
	require.NoError(t, a.Unlock(t.Context(), la))
	took := waitReturns(t, got, unlocked, 3*time.Second, "an Unlock (holder's ttl 10s), its release messages to b's old connections lost")
	t.Logf("Lock acquired %v after the Unlock", took)
	require.NoError(t, b.Unlock(t.Context(), lb))
}

// TestWaitWakesOnBrokenConnection: when the server closes the pub/sub connections,
// a Wait in progress returns (a release may have been missed) instead of waiting
// for the holder's ttl, and the next Wait subscribes again and wakes on Unlock.
func TestWaitWakesOnBrokenConnection(t *testing.T) {
	a := newLocker(t, nil)
	b := newLocker(t, &redlock.Options{NodeTimeout: time.Second})
	key := "broken-sub-" + driver.NewToken()[:8]
	_, _, channel := redlock.Names(redlock.DefaultPrefix, key)
	la, err := a.TryLock(t.Context(), key, 10*time.Second)
	require.NoError(t, err)
	woke := make(chan error, 1)
	go func() { woke <- b.Wait(t.Context(), key) }()
	require.Eventually(t, func() bool { return numSubAll(t, channel) == 1 }, 5*time.Second, time.Millisecond,
		"b's Wait to subscribe on every node")
	start := time.Now()
	for _, s := range nodes {
		_, err := testenv.RedisCommand(t.Context(), s.Addr(), "CLIENT", "KILL", "TYPE", "pubsub")
		require.NoError(t, err)
	}
	waitReturns(t, woke, start, 3*time.Second, "the kill of its connections (holder's ttl 10s)")
	go func() { woke <- b.Wait(t.Context(), key) }()
	require.Eventually(t, func() bool { return numSubAll(t, channel) == 1 }, 5*time.Second, time.Millisecond,
		"b's Wait to subscribe again")
	start = time.Now()
	require.NoError(t, a.Unlock(t.Context(), la))
	waitReturns(t, woke, start, 3*time.Second, "Unlock")
}
