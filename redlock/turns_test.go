package redlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/redlock"
)

// TestTurnsOneRound: Lockers with one waiter each, all in the key's turns, take the
// key one after another, and each handoff costs one round: the release names the
// Locker whose turn it is, and the others stay asleep. Before turns, every Locker
// that had seen the holder tried the key on its release (4.5 rounds per handoff on
// average with 8 Lockers: 8, then 7, ...).
func TestTurnsOneRound(t *testing.T) {
	const lockers = 8
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := "turns-" + driver.NewToken()[:8]
	// A loaded machine: generous node timeouts, and no Locker in line tries the key
	// because a handoff took longer than the turn timeout (not what this test
	// counts).
	opts := redlock.WithTurnTimeout(&redlock.Options{NodeTimeout: 2 * time.Second}, 5*time.Second)
	holder := newLocker(t, opts)
	first, err := holder.TryLock(ctx, key, 30*time.Second)
	require.NoError(t, err)
	var ls []*redlock.Locker
	for range lockers {
		ls = append(ls, newLocker(t, opts))
	}
	// A first Wait subscribes each Locker to the key's channel (it stays
	// subscribed a while), so that the TryLocks of Lock below join the key's turns.
	var warm sync.WaitGroup
	for _, l := range ls {
		warm.Go(func() {
			_, err := l.TryLock(ctx, key, 30*time.Second)
			require.ErrorIs(t, err, distlock.ErrLocked)
			wctx, wcancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer wcancel()
			require.ErrorIs(t, l.Wait(wctx, key), context.DeadlineExceeded)
		})
	}
	warm.Wait()
	per := herdRounds(ctx, t, holder, first, ls, 1, 0)
	t.Logf("%d handoffs among %d Lockers: %.2f rounds per handoff", lockers, lockers, per)
	require.LessOrEqual(t, per, 2.0)
}

// TestTurnsHerd: a herd of waiters on 4 Lockers costs one round per handoff: the
// release names one Locker, which wakes one waiter (1.3 rounds per handoff
// measured; before turns, every Locker that had seen the holder woke one: 2 to 3.7).
func TestTurnsHerd(t *testing.T) {
	const lockers, perLocker, hold = 8, 15, time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := "turns-herd-" + driver.NewToken()[:8]
	opts := redlock.WithTurnTimeout(&redlock.Options{NodeTimeout: 2 * time.Second}, 5*time.Second)
	holder := newLocker(t, opts)
	first, err := holder.TryLock(ctx, key, 30*time.Second)
	require.NoError(t, err)
	var ls []*redlock.Locker
	for range lockers {
		ls = append(ls, newLocker(t, opts))
	}
	per := herdRounds(ctx, t, holder, first, ls, perLocker, hold)
	t.Logf("%d handoffs, %.2f rounds per handoff", lockers*perLocker, per)
	// The first release names nobody yet (no Locker had joined the turns: their
	// first TryLock came before their Waits subscribed), so each Locker tries it;
	// from then on the Lockers with waiters take turns.
	require.LessOrEqual(t, per, 2.5)
}

// TestTurnTimeout: a release that names a Locker with no waiter left (its caller
// gave up) delays the next Locker in line by turnTimeout, not until the key's ttl.
func TestTurnTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := "turns-gone-" + driver.NewToken()[:8]
	holder, gone, next := newLocker(t, nil), newLocker(t, nil), newLocker(t, nil)
	lease, err := holder.TryLock(ctx, key, 20*time.Second)
	require.NoError(t, err)
	// join puts l in the key's turns: a TryLock while a Wait of l has the key's
	// channel subscribed.
	join := func(l *redlock.Locker) {
		_, err := l.TryLock(ctx, key, 20*time.Second)
		require.ErrorIs(t, err, distlock.ErrLocked)
		wctx, wcancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer wcancel()
		require.ErrorIs(t, l.Wait(wctx, key), context.DeadlineExceeded)
		_, err = l.TryLock(ctx, key, 20*time.Second)
		require.ErrorIs(t, err, distlock.ErrLocked)
	}
	join(gone) // then its caller gives up: first in line, with no waiter
	join(next)
	done := make(chan error, 1)
	go func() {
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		defer wcancel()
		err := next.Wait(wctx, key)
		if errors.Is(err, context.DeadlineExceeded) {
			err = errors.New("the Wait outlasted 10s: the turn of a Locker that was gone held it up")
		}
		done <- err
	}()
	require.Eventually(t, func() bool { return next.Waiting(key) == 1 }, 10*time.Second, time.Millisecond)
	start := time.Now()
	require.NoError(t, holder.Unlock(ctx, lease))
	require.NoError(t, <-done)
	t.Logf("the next Locker woke %v after the release that named the Locker that was gone", time.Since(start))
	got, err := next.TryLock(ctx, key, 20*time.Second)
	require.NoError(t, err)
	require.NoError(t, next.Unlock(ctx, got))
}

// TestTurnLateRelease: the Locker whose turn a release names wakes on the first
// node's message and tries the key while the other nodes have not run the release
// yet; its TryLock fails for contention. The release's messages from the other
// nodes then wake it again, and it takes the key at once. Before, a Locker with
// more waiters on the key took them for the release it had announced already and
// slept until the holder's locks expired (here 20s; the turn timeout of the
// Lockers behind it, 50ms by default, when there are any).
func TestTurnLateRelease(t *testing.T) {
	const callers = 2
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := "turns-late-" + driver.NewToken()[:8]
	opts := redlock.WithTurnTimeout(&redlock.Options{NodeTimeout: 2 * time.Second}, 30*time.Second)
	holder, next := newLocker(t, opts), newLocker(t, opts)
	lease, err := holder.TryLock(ctx, key, 20*time.Second)
	require.NoError(t, err)
	attempts := next.CountAcquires()
	got := make(chan error, callers)
	for range callers {
		go func() {
			l, err := distlock.Lock(ctx, next, key, 20*time.Second, &distlock.LockOptions{MaxWait: 50 * time.Second})
			if err == nil {
				err = next.Unlock(ctx, l)
			}
			got <- err
		}()
	}
	require.Eventually(t, func() bool { return next.Waiting(key) == callers }, 10*time.Second, time.Millisecond)
	// A TryLock while the Waits have the key's channel subscribed puts next in
	// the key's turns.
	_, err = next.TryLock(ctx, key, 20*time.Second)
	require.ErrorIs(t, err, distlock.ErrLocked)
	before := attempts()
	// The release reaches node 0 first: next wakes a caller, whose TryLock fails
	// on the other four.
	released, err := holder.UnlockOn(ctx, lease, 0)
	require.NoError(t, err)
	require.True(t, released)
	require.Eventually(t, func() bool { return attempts() > before && next.Waiting(key) == callers }, 10*time.Second, time.Millisecond)
	start := time.Now()
	for i := 1; i < 5; i++ {
		released, err := holder.UnlockOn(ctx, lease, i)
		require.NoError(t, err)
		require.True(t, released)
	}
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatalf("the Locker whose turn it was did not take the key within 5s of the release's last node (%d attempts)", attempts())
	}
	t.Logf("took the key %v after the release reached the other nodes, %d attempts in all", time.Since(start), attempts())
	require.NoError(t, <-got)
}

// TestTurnPlaceKept: a Locker keeps its place in the key's turns across the gap
// between its Waits. A release that named it on one node only (the nodes' turns
// disagreed, or its other messages were lost) took it out of that node's turns;
// its next TryLock puts it back there with the score it has on the others. Before,
// the end of its Wait dropped its score, and the TryLock put it at the end of that
// node's turns: from then on the nodes disagreed on the order, and their releases
// named two Lockers at once (in W2 of the matrix, 36% of the handoffs, each 0.4ms
// slower: both Lockers tried the key).
func TestTurnPlaceKept(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := "turns-place-" + driver.NewToken()[:8]
	holder := newLocker(t, nil)
	// The key's channel stays subscribed between the Waits, so that the TryLocks
	// join the turns however slow the machine.
	l := newLocker(t, redlock.WithHub(nil, 0, 0, 30*time.Second))
	lease, err := holder.TryLock(ctx, key, 20*time.Second)
	require.NoError(t, err)
	// l waits: its Wait's read of the locks puts it in the turns.
	_, err = l.TryLock(ctx, key, 20*time.Second)
	require.ErrorIs(t, err, distlock.ErrLocked)
	wctx, wcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	require.ErrorIs(t, l.Wait(wctx, key), context.DeadlineExceeded)
	wcancel()
	inTurns(ctx, t, l, key)
	score := func(i int) any {
		v, err := testenv.RedisCommand(ctx, nodes[i].Addr(), "ZSCORE", redlock.TurnsName(key), l.ID())
		require.NoError(t, err)
		return v
	}
	want := score(1)
	require.NotNil(t, want)
	// A release named l on node 0 only.
	_, err = testenv.RedisCommand(ctx, nodes[0].Addr(), "ZREM", redlock.TurnsName(key), l.ID())
	require.NoError(t, err)
	// l's wait loop goes on: TryLock, then a Wait.
	_, err = l.TryLock(ctx, key, 20*time.Second)
	require.ErrorIs(t, err, distlock.ErrLocked)
	inTurns(ctx, t, l, key)
	for i := range nodes {
		require.Equal(t, want, score(i), "l's score on node %d", i)
	}
	require.NoError(t, holder.Unlock(ctx, lease))
}
