package zklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/zklock"
)

// TestNoHerd: 1,000 Waits on one key, spread over 4 Lockers, cost O(1) requests per
// handoff, not O(waiters): a release wakes one waiter (whose lock node, queued
// behind the holder, then holds the key), and the TryLock that follows takes the
// lease over and lets the next waiter move up. The requests of the 4 Lockers are
// counted on the wire from a TryLock of the woken Locker to the next wake.
func TestNoHerd(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 waiters")
	}
	const lockers, waits, rounds = 4, 1000, 3
	w := newWire()
	opts := *quiet
	opts.Dialer = w.dial
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ls := make([]*zklock.Locker, lockers)
	for i := range ls {
		s, err := zklock.Connect(ctx, standaloneAddrs(), 10*time.Second, &opts)
		require.NoError(t, err)
		t.Cleanup(s.Close)
		l, err := zklock.New(s, &zklock.Options{TickTime: testenv.ZooKeeperTickTime})
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		ls[i] = l
	}
	key := uniqueKey(t)
	holder := newClient(t, standaloneAddrs(), 10*time.Second, nil, false)
	lease, err := holder.l.TryLock(ctx, key, time.Minute)
	require.NoError(t, err)

	woke := make(chan int, waits)
	for i := range waits {
		go func() {
			if ctx.Err() == nil && ls[i%lockers].Wait(ctx, key) == nil {
				woke <- i % lockers
			}
		}()
	}
	require.Eventually(t, func() bool { return len(children(t, holder.conn, keyPath(key))) >= 1+waits }, time.Minute, 50*time.Millisecond, "the waiters queued")
	// Until every waiter has set its watch: no request for 300ms.
	require.Eventually(t, func() bool {
		w.reset()
		time.Sleep(300 * time.Millisecond)
		_, n, _ := w.snapshot()
		return n == 0
	}, time.Minute, time.Millisecond, "the waiters settled")
	release := func() { require.NoError(t, holder.l.Unlock(ctx, lease)) }
	for r := range rounds {
		release()
		var i int
		select {
		case i = <-woke:
		case <-ctx.Done():
			t.Fatal("no waiter woke")
		}
		w.reset()
		l := ls[i]
		got, err := l.TryLock(ctx, key, time.Minute)
		require.NoError(t, err, "round %d: the woken waiter's TryLock", r)
		time.Sleep(300 * time.Millisecond) // the next waiters move up
		release = func() { require.NoError(t, l.Unlock(ctx, got)) }
		ops, requests, _ := w.snapshot()
		t.Logf("round %d: %d requests (%s)", r, requests, ops)
		require.LessOrEqual(t, requests, 10, "round %d: requests of the %d Lockers per handoff (%s)", r, lockers, ops)
		select {
		case j := <-woke:
			t.Fatalf("round %d: a second waiter (Locker %d) woke while the key was held", r, j)
		default:
		}
	}
	release()
}
