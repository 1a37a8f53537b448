package redlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/redlock"
)

// inTurns waits until l is in key's turns on every node.
func inTurns(ctx context.Context, t *testing.T, l *redlock.Locker, key string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, s := range nodes {
			v, err := testenv.RedisCommand(ctx, s.Addr(), "ZSCORE", redlock.TurnsName(key), l.ID())
			if err != nil || v == nil {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond, "the Locker joins the key's turns on every node")
}

// spy subscribes a plain client to channel on every node and returns a function
// that counts the messages that came on it since, up to a PING sent after them on
// each node's connection.
func spy(ctx context.Context, t *testing.T, channel string) (count func() int) {
	t.Helper()
	var pss []*redis.PubSub
	for _, c := range clients(t, nodeAddrs()) {
		ps := c.Subscribe(ctx, channel)
		t.Cleanup(func() { _ = ps.Close() })
		_, err := ps.Receive(ctx) // the subscription's confirmation
		require.NoError(t, err)
		pss = append(pss, ps)
	}
	return func() int {
		n := 0
		for _, ps := range pss {
			require.NoError(t, ps.Ping(ctx))
			for {
				msg, err := ps.Receive(ctx)
				require.NoError(t, err)
				if _, pong := msg.(*redis.Pong); pong {
					break
				}
				if _, ok := msg.(*redis.Message); ok {
					n++
				}
			}
		}
		return n
	}
}

// TestReleaseToTurnChannel: a release that names a waiting Locker goes to that
// Locker's turn channel, not to the key's channel, where every Locker with waiters
// on the key would read it on every node (5 messages on the old code, one per
// node); the Locker named still wakes and takes the key.
func TestReleaseToTurnChannel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := "turnchan-" + driver.NewToken()[:8]
	_, _, channel := redlock.Names(redlock.DefaultPrefix, key)
	holder, waiter := newLocker(t, nil), newLocker(t, nil)
	lease, err := holder.TryLock(ctx, key, 30*time.Second)
	require.NoError(t, err)
	count := spy(ctx, t, channel)

	// A first Wait subscribes the waiter's channels (they stay subscribed a
	// while), so that its next TryLock joins the key's turns (the old code's way
	// into them too).
	_, err = waiter.TryLock(ctx, key, 30*time.Second)
	require.ErrorIs(t, err, distlock.ErrLocked)
	wctx, wcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	require.ErrorIs(t, waiter.Wait(wctx, key), context.DeadlineExceeded)
	wcancel()
	_, err = waiter.TryLock(ctx, key, 30*time.Second)
	require.ErrorIs(t, err, distlock.ErrLocked)
	woke := make(chan error, 1)
	go func() { woke <- waiter.Wait(ctx, key) }()
	inTurns(ctx, t, waiter, key)

	require.NoError(t, holder.Unlock(ctx, lease))
	select {
	case err := <-woke:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the Wait of the Locker named did not wake")
	}
	got, err := waiter.TryLock(ctx, key, 30*time.Second)
	require.NoError(t, err)
	// The holder's release went to the waiter's turn channel only.
	require.Zero(t, count(), "messages on the key's channel")
	// The waiter's own release names nobody: it goes to the key's channel.
	require.NoError(t, waiter.Unlock(ctx, got))
	require.Eventually(t, func() bool { return count() > 0 }, 10*time.Second, time.Millisecond)
}

// TestWaitJoinsTurns: a Locker whose TryLock found the key held before any of
// its Waits subscribed joins the turns with its Wait's read, so a release names it
// in its turn: here the release of a Locker that has another waiter, and goes
// back into line behind it. Without the read's join it would hear none of the
// releases (they go to the turn channels of the Lockers named) and wait for the
// holder's ttl (Lock's ctx here).
func TestWaitJoinsTurns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := "waitjoin-" + driver.NewToken()[:8]
	// The Lockers in line do not try on their own within the test.
	opts := redlock.WithTurnTimeout(&redlock.Options{NodeTimeout: 2 * time.Second}, 20*time.Second)
	holder, b, c := newLocker(t, opts), newLocker(t, opts), newLocker(t, opts)
	lease, err := holder.TryLock(ctx, key, 30*time.Second)
	require.NoError(t, err)

	var (
		mu    sync.Mutex
		order []string
		wg    sync.WaitGroup
	)
	lock := func(l *redlock.Locker, name string) {
		wg.Go(func() {
			lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
			defer lcancel()
			// No Wait of Lock's ends by itself within the test (MaxWait).
			got, err := distlock.Lock(lctx, l, key, 30*time.Second, &distlock.LockOptions{MaxWait: time.Minute})
			if err != nil {
				t.Errorf("%s: Lock: %v", name, err)
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			if err := l.Unlock(ctx, got); err != nil {
				t.Errorf("%s: Unlock: %v", name, err)
			}
		})
	}
	lock(b, "b")
	lock(b, "b")
	require.Eventually(t, func() bool { return b.Waiting(key) == 2 }, 10*time.Second, time.Millisecond)
	inTurns(ctx, t, b, key)
	lock(c, "c")
	require.Eventually(t, func() bool { return c.Waiting(key) == 1 }, 10*time.Second, time.Millisecond)
	inTurns(ctx, t, c, key)

	require.NoError(t, holder.Unlock(ctx, lease))
	wg.Wait()
	require.Equal(t, []string{"b", "c", "b"}, order)
}

// TestTurnScoreSame: however many Waits and attempts of a Locker add it to the
// key's turns, and in whatever order they reach the nodes, every node gives it the
// same score (since when it waits), so that the nodes agree on whose turn it is.
func TestTurnScoreSame(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := "turnscore-" + driver.NewToken()[:8]
	holder := newLocker(t, nil)
	lease, err := holder.TryLock(ctx, key, 30*time.Second)
	require.NoError(t, err)
	const lockers, callers = 3, 40
	var ls []*redlock.Locker
	for range lockers {
		ls = append(ls, newLocker(t, nil))
	}
	lctx, lcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, l := range ls {
		for range callers {
			wg.Go(func() {
				if got, err := distlock.Lock(lctx, l, key, 30*time.Second, nil); err == nil {
					_ = l.Unlock(ctx, got)
				}
			})
		}
	}
	for _, l := range ls {
		require.Eventually(t, func() bool { return l.Waiting(key) == callers }, 20*time.Second, time.Millisecond)
		inTurns(ctx, t, l, key)
	}
	for _, l := range ls {
		var scores []any
		for _, s := range nodes {
			v, err := testenv.RedisCommand(ctx, s.Addr(), "ZSCORE", redlock.TurnsName(key), l.ID())
			require.NoError(t, err)
			scores = append(scores, v)
		}
		for i := range scores {
			require.Equal(t, scores[0], scores[i], "the Locker's score on node %d and node 0", i)
		}
	}
	lcancel()
	wg.Wait()
	require.NoError(t, holder.Unlock(ctx, lease))
}

// TestTurnPassedOn: when the Locker that a release names has no waiter left but is
// still subscribed to its turn channel (its hub keeps an idle channel a while), so
// that the release does not go to the key's channel, the Locker after it in line
// hears the release too and tries the key once its turn timer runs out, instead of
// sleeping until the holder's ttl.
func TestTurnPassedOn(t *testing.T) { turnPassedOn(t, 1) }

// TestTurnPassedOnTwice: the Locker named by a release and the one after it both
// gave up their Waits but keep their channels subscribed (so the release goes to
// their turn channels only); the Locker behind them must still wake soon after the
// release (passTurn), not at its Wait's bound (the holder's ttl of 30s).
func TestTurnPassedOnTwice(t *testing.T) { turnPassedOn(t, 2) }

// turnPassedOn puts gaveUp Lockers in line that wait, join the turns and give up
// (keeping their idle channels subscribed for the whole test), then one more that
// waits behind them, and checks that it wakes soon after the holder's release.
func turnPassedOn(t *testing.T, gaveUp int) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := "turnpass-" + driver.NewToken()[:8]
	opts := func() *redlock.Options {
		return redlock.WithTurnTimeout(&redlock.Options{NodeTimeout: 2 * time.Second}, 100*time.Millisecond)
	}
	holder, c := newLocker(t, opts()), newLocker(t, opts())
	lease, err := holder.TryLock(ctx, key, 30*time.Second)
	require.NoError(t, err)

	for range gaveUp {
		b := newLocker(t, redlock.WithHub(opts(), 0, 0, time.Minute))
		_, err = b.TryLock(ctx, key, 30*time.Second)
		require.ErrorIs(t, err, distlock.ErrLocked)
		bctx, bcancel := context.WithCancel(ctx)
		bdone := make(chan error, 1)
		go func() { bdone <- b.Wait(bctx, key) }()
		inTurns(ctx, t, b, key)
		bcancel()
		require.ErrorIs(t, <-bdone, context.Canceled)
	}

	// c waits behind them.
	_, err = c.TryLock(ctx, key, 30*time.Second)
	require.ErrorIs(t, err, distlock.ErrLocked)
	cdone := make(chan error, 1)
	go func() { cdone <- c.Wait(ctx, key) }()
	inTurns(ctx, t, c, key)

	require.NoError(t, holder.Unlock(ctx, lease))
	select {
	case err := <-cdone:
		require.NoError(t, err)
	case <-time.After(10 * time.Second): // far below the holder's ttl of 30s
		t.Fatalf("the Locker behind %d that gave up did not wake", gaveUp)
	}
	got, err := c.TryLock(ctx, key, 30*time.Second)
	require.NoError(t, err)
	require.NoError(t, c.Unlock(ctx, got))
}
