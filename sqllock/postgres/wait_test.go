package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
	"github.com/stretchr/testify/require"
)

// waiting reports whether w's listener has a current connection with n waiters
// (and, if listen, that it is listening) for which also holds.
func waiting(w *Locker, n int, listen bool, also func(lc *listenConn) bool) func() bool {
	return func() bool {
		w.ln.mu.Lock()
		defer w.ln.mu.Unlock()
		lc := w.ln.cur
		return lc != nil && len(lc.waiters) == n && (!listen || listening(lc)) && (also == nil || also(lc))
	}
}

// current returns the listener's current connection.
func current(w *Locker) *listenConn {
	w.ln.mu.Lock()
	defer w.ln.mu.Unlock()
	return w.ln.cur
}

// requireReturns waits up to 10s for a Wait's result on ch and returns it.
func requireReturns(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return within 10s", what)
		return nil
	}
}

// TestWaitSharesListener: concurrent Waits of one Locker share one listening
// connection; a release wakes only the waiters of its key; the connection stays
// open after the last Wait returned, for the next one, until it has been idle for
// a while or Close closes it.
func TestWaitSharesListener(t *testing.T) {
	a := newLocker(t, "", &sqllock.Options{Table: "waiters"})
	w := newLocker(t, "", &sqllock.Options{Table: "waiters"})
	const n = 4
	keys := make([]string, n)
	leases := make([]distlock.Lease, n)
	woke := make([]chan error, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("wait-%d-%s", i, driver.NewToken())
		var err error
		leases[i], err = a.TryLock(sqltest.OpCtx(t), keys[i], time.Minute)
		require.NoError(t, err)
		woke[i] = make(chan error, 1)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for i := range keys {
		go func() { woke[i] <- w.Wait(ctx, keys[i]) }()
	}
	require.Eventually(t, waiting(w, n, false, nil), 10*time.Second, 10*time.Millisecond, "the waiters did not all join one listening connection")
	// Release key 0: only its waiter wakes.
	require.NoError(t, a.Unlock(sqltest.OpCtx(t), leases[0]))
	require.NoError(t, requireReturns(t, woke[0], "Wait after Unlock"))
	for i := 1; i < n; i++ {
		select {
		case err := <-woke[i]:
			t.Fatalf("Wait on %q returned (%v) when another key was released", keys[i], err)
		default:
		}
	}
	cancel()
	for i := 1; i < n; i++ {
		err := <-woke[i]
		require.ErrorIs(t, err, distlock.ErrLocked, "cancelled Wait")
		require.ErrorIs(t, err, context.Canceled, "cancelled Wait")
		require.NoError(t, a.Unlock(sqltest.OpCtx(t), leases[i]))
	}
	cur := current(w)
	require.NotNil(t, cur, "the listening connection closed when the last Wait returned; it must stay for the next")
	// The next Wait joins it.
	la, err := a.TryLock(sqltest.OpCtx(t), keys[0], time.Minute)
	require.NoError(t, err)
	woke0 := make(chan error, 1)
	go func() { woke0 <- w.Wait(t.Context(), keys[0]) }()
	require.Eventually(t, waiting(w, 1, false, nil), 10*time.Second, 10*time.Millisecond, "the next Wait did not join the listening connection")
	require.Same(t, cur, current(w), "the next Wait opened another listening connection")
	require.NoError(t, a.Unlock(sqltest.OpCtx(t), la))
	require.NoError(t, <-woke0, "Wait after Unlock")
	require.NoError(t, w.Close())
	require.Nil(t, current(w), "the listener names a connection after Close")
	select {
	case <-cur.done:
	default:
		t.Fatal("the listening connection's goroutine is still running after Close")
	}
}

// TestListenerIdleClose: a listening connection closes once it has been idle for
// the listener's idle time, and its goroutine returns; Close ends a Wait in
// progress with ErrClosed.
func TestListenerIdleClose(t *testing.T) {
	a := newLocker(t, "", &sqllock.Options{Table: "waiters"})
	w := newLocker(t, "", &sqllock.Options{Table: "waiters"})
	w.ln.idle = 100 * time.Millisecond // before any Wait
	key := sqltest.Key("idle")
	la, err := a.TryLock(sqltest.OpCtx(t), key, time.Minute)
	require.NoError(t, err)
	defer a.Unlock(sqltest.OpCtx(t), la)
	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() { first <- w.Wait(ctx, key) }()
	require.Eventually(t, waiting(w, 1, true, nil), 10*time.Second, 10*time.Millisecond, "Wait did not start listening")
	lc := current(w)
	cancel()
	err = <-first
	require.ErrorIs(t, err, distlock.ErrLocked, "cancelled Wait on a held key")
	require.ErrorIs(t, err, context.Canceled, "cancelled Wait on a held key")
	select {
	case <-lc.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the idle listening connection was not closed 10s after its idle time")
	}
	require.Nil(t, current(w), "the listener still names a connection after closing it")

	woke := make(chan error, 1)
	go func() { woke <- w.Wait(t.Context(), key) }()
	require.Eventually(t, waiting(w, 1, true, nil), 10*time.Second, 10*time.Millisecond, "Wait did not start listening")
	require.NoError(t, w.Close())
	err = requireReturns(t, woke, "Wait when its Locker was closed")
	require.ErrorIs(t, err, distlock.ErrClosed, "Wait when its Locker was closed")
}

// TestWaitFaults: Wait through a partition ends with the context; Wait whose
// connections are cut returns promptly (nil, a hint, when its listening connection
// died; an error when it cannot listen) and never blocks.
func TestWaitFaults(t *testing.T) {
	a := newLocker(t, "", &sqllock.Options{Table: "waitfaults"})
	w, p, _ := newClient(t, &sqllock.Options{Table: "waitfaults"})
	key := sqltest.Key("waitfault")
	la, err := a.TryLock(sqltest.OpCtx(t), key, time.Minute)
	require.NoError(t, err)
	defer a.Unlock(sqltest.OpCtx(t), la)

	t.Run("Blackhole", func(t *testing.T) {
		p.Blackhole()
		defer p.Heal()
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := w.Wait(ctx, key)
		require.Less(t, time.Since(start), 3*time.Second, "Wait through a partition with a 500ms context")
		require.ErrorIs(t, err, distlock.ErrLocked, "Wait through a partition")
		require.ErrorIs(t, err, context.DeadlineExceeded, "Wait through a partition")
	})
	t.Run("CutWhileWaiting", func(t *testing.T) {
		woke := make(chan error, 1)
		go func() { woke <- w.Wait(t.Context(), key) }()
		require.Eventually(t, waiting(w, 1, false, nil), 10*time.Second, 10*time.Millisecond, "Wait did not start listening")
		// The waiter may still be reading the row or already waiting: either way
		// the cut must end Wait promptly, with nil (the listening connection died:
		// the release may have been missed) or the row read's transport error.
		p.Cut()
		defer p.Heal()
		err := requireReturns(t, woke, "Wait on cut connections")
		require.NotErrorIs(t, err, distlock.ErrLocked, "Wait on a cut connection must not claim the key is locked")
	})
	t.Run("CannotListen", func(t *testing.T) {
		p.Cut()
		defer p.Heal()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		err := w.Wait(ctx, key)
		require.Error(t, err, "Wait that cannot connect")
		require.NotErrorIs(t, err, distlock.ErrLocked, "Wait that cannot connect")
		require.NoError(t, ctx.Err(), "Wait that cannot connect must fail promptly")
	})
}

// TestListenerSilent: a listening connection that goes silent (a blackhole does not
// break it) fails the listener's periodic check; the Wait in progress, whose
// notification was lost, returns long before the holder's ttl, and the next Wait
// listens on a new connection.
func TestListenerSilent(t *testing.T) {
	a := newLocker(t, "", &sqllock.Options{Table: "waiters"})
	w, p, _ := newClient(t, &sqllock.Options{Table: "waiters"})
	w.ln.ping = 100 * time.Millisecond // before any Wait
	key := sqltest.Key("silent")
	la, err := a.TryLock(sqltest.OpCtx(t), key, time.Minute)
	require.NoError(t, err)
	acquired := w.ln.pool.Stat().AcquireCount()
	woke := make(chan error, 1)
	go func() { woke <- w.Wait(t.Context(), key) }()
	// Wait listens, then reads the row with a pooled connection (through the
	// proxy): once it gave that back, it only listens.
	require.Eventually(t, waiting(w, 1, true, func(*listenConn) bool {
		st := w.ln.pool.Stat()
		return st.AcquireCount() > acquired && st.AcquiredConns() == 0
	}), 10*time.Second, 10*time.Millisecond, "Wait did not start listening and read the row")
	select {
	case err := <-woke:
		t.Fatalf("Wait returned %v while the key was held", err)
	default:
	}
	first := current(w)
	p.Blackhole()
	start := time.Now()
	require.NoError(t, a.Unlock(sqltest.OpCtx(t), la))
	require.NoError(t, requireReturns(t, woke, "Wait whose connection went silent"))
	t.Logf("Wait returned %v after the blackhole", time.Since(start))
	p.Heal()
	select {
	case <-first.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the silent connection's goroutine did not return")
	}
	la, err = a.TryLock(sqltest.OpCtx(t), key, time.Minute)
	require.NoError(t, err)
	woke = make(chan error, 1)
	go func() { woke <- w.Wait(t.Context(), key) }()
	require.Eventually(t, waiting(w, 1, true, func(lc *listenConn) bool { return lc != first }), 10*time.Second, 10*time.Millisecond,
		"the next Wait did not listen on a new connection")
	require.NoError(t, a.Unlock(sqltest.OpCtx(t), la))
	require.NoError(t, requireReturns(t, woke, "Wait on the new connection"))
}
