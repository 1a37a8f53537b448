package zklock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/zklock"
)

// TestNoHerd: 1,000 Waits on one key, spread over 4 Lockers, cost O(1) requests per
// handoff, not O(waiters): a release wakes one waiter (whose lock node, queued
// behind the holder, then holds the key), the TryLock that follows takes the lease
// over, and one waiter moves up among the first preWaiters. The requests of the 4
// Lockers are counted on the wire over 5 handoffs (about 8 each).
func TestNoHerd(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 waiters")
	}
	const lockers, waits, rounds = 4, 1000, 5
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
	locks := 0
	for _, name := range children(t, holder.conn, keyPath(key)) {
		if strings.HasPrefix(name, "_c_") {
			locks++
		}
	}
	t.Logf("%d lock nodes among the children", locks)
	release := func() { require.NoError(t, holder.l.Unlock(ctx, lease)) }
	w.reset()
	for r := range rounds {
		release()
		var i int
		select {
		case i = <-woke:
		case <-ctx.Done():
			t.Fatal("no waiter woke")
		}
		l := ls[i]
		got, err := l.TryLock(ctx, key, time.Minute)
		require.NoError(t, err, "round %d: the woken waiter's TryLock", r)
		time.Sleep(100 * time.Millisecond) // the next waiters move up
		select {
		case j := <-woke:
			t.Fatalf("round %d: a second waiter (Locker %d) woke while the key was held", r, j)
		default:
		}
		release = func() { require.NoError(t, l.Unlock(ctx, got)) }
	}
	// Until the last waiters to move up have set their watches.
	_, before, _ := w.snapshot()
	require.Eventually(t, func() bool {
		time.Sleep(300 * time.Millisecond)
		_, n, _ := w.snapshot()
		settled := n == before
		before = n
		return settled
	}, time.Minute, time.Millisecond, "the waiters settled")
	ops, requests, _ := w.snapshot()
	t.Logf("%d handoffs: %d requests (%s)", rounds, requests, ops)
	// Per handoff: the Unlock's delete, the claimed waiter node's delete, and the
	// waiter that moves up among the first preWaiters: listing, lock node, listing,
	// a watch on each lower contender; now and then a check write (a claim whose
	// lock node is old) or a second listing.
	require.LessOrEqual(t, requests, 12*rounds, "requests of the %d Lockers for %d handoffs (%s)", lockers, rounds, ops)
	release()
}
