package redislock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/redislock"
)

// Tests of a pub/sub connection that a NAT or load balancer dropped without a word
// (issue 13): a fault proxy blackholes it, while new connections work.

// tapped returns a Locker whose client dials every connection through a proxy of
// its own (see testenv.RedisTap), with its command connection open.
func tapped(t *testing.T, opts *redislock.Options) (*redislock.Locker, *testenv.RedisTap) {
	t.Helper()
	tap := testenv.NewRedisTap(t)
	// A short ReadTimeout: a command left waiting on a silenced connection (which
	// Close waits for) ends soon.
	c := redis.NewClient(&redis.Options{Addr: redisSrv.Addr(), Dialer: tap.Dialer(), ReadTimeout: 500 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.Ping(t.Context()).Err())
	return newLockerOn(t, c, opts), tap
}

// TestWaitBoundedBeforeSubscribed (issue 13, case 1): a Wait whose subscription is
// never confirmed (its pub/sub connection is silent) returns by the holder's
// remaining ttl, not after the hub's ping and replacement (10s by default) or ctx;
// and when ctx ends before it saw the key held (every connection silent), it does
// not report ErrLocked.
func TestWaitBoundedBeforeSubscribed(t *testing.T) {
	b, tap := tapped(t, nil)
	a := newLocker(t, nil)
	// Open b's pub/sub connection, then silence it.
	require.NoError(t, b.Wait(ctxT(t), testKey(t)+"-free"))
	require.Eventually(t, func() bool { return tap.SilencePubSub() == 1 }, 5*time.Second, time.Millisecond,
		"the pub/sub connection to subscribe")

	key := testKey(t)
	const ttl = 300 * time.Millisecond
	la, err := a.TryLock(ctxT(t), key, ttl)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // distlock.Lock's MaxWait is 5s
	defer cancel()
	start := time.Now()
	err = b.Wait(ctx, key)
	took := time.Since(start)
	require.NoError(t, err, "Wait through a silent pub/sub connection")
	require.Less(t, took, la.Remaining()+2*time.Second,
		"Wait through a silent pub/sub connection took %v for a holder with %v left", took, ttl)
	t.Logf("Wait returned %v after it began, for a holder with %v left", took, ttl)

	// Every connection silent: Wait cannot see the key held, so its context's end
	// is not contention.
	key2 := testKey(t)
	_, err = a.TryLock(ctxT(t), key2, time.Minute)
	require.NoError(t, err)
	tap.SilenceAll()
	ctx2, cancel2 := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel2()
	err = b.Wait(ctx2, key2)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, distlock.ErrLocked, "Wait that never saw the key held")
}

// TestHubIdleAfterReplacement (issue 13, case 2): a hub whose pub/sub connection
// dies while no Wait uses it does not leak the connection, its goroutines or the
// server-side subscription: the hub closes within its idle time, with no Close.
func TestHubIdleAfterReplacement(t *testing.T) {
	b, tap := tapped(t, redislock.WithHub(nil, 50*time.Millisecond, time.Second, 0))
	raw := newClient(t, redisSrv)
	require.NoError(t, raw.Ping(t.Context()).Err())
	key := testKey(t)
	_, _, channel := b.Names(key)
	before := goleak.IgnoreCurrent()
	// A Wait on a free key opens the hub; the channel stays subscribed after it.
	require.NoError(t, b.Wait(ctxT(t), key))
	require.Eventually(t, func() bool { return numSub(t, raw, channel) == 1 }, 5*time.Second, time.Millisecond,
		"the channel to be subscribed")
	require.Equal(t, 1, tap.SilencePubSub())
	// The hub pings after 50ms of silence and gives up on the connection 50ms later,
	// long before its idle time (1s): then, idle, it must close, and leave nothing.
	require.Eventually(t, func() bool { return numSub(t, raw, channel) == 0 }, 5*time.Second, 10*time.Millisecond,
		"the server still counts the idle hub's subscription")
	require.NoError(t, goleak.Find(before), "the idle hub left goroutines")
}
