package sqllock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// poll calls f every few milliseconds until it returns true or d passes, and
// reports whether it did.
func poll(t *testing.T, d time.Duration, f func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if f() {
			return true
		}
		if time.Now().After(deadline) || t.Context().Err() != nil {
			return false
		}
		time.Sleep(20 * time.Millisecond) // pacing the polling, bounded by the deadline
	}
}

// TestPostgresRestartKeepsLease: a lease survives a restart of PostgreSQL (a fast
// shutdown, and a crash by SIGKILL): its holder renews it, other clients still get
// ErrLocked, and the fence goes on from where it was.
func TestPostgresRestartKeepsLease(t *testing.T) {
	if pgSrv.External() {
		t.Fatal("this test restarts PostgreSQL, so DISTLOCK_POSTGRES_URL must be unset")
	}
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			a, b := newPG(t, &Options{Table: "restart"}), newPG(t, &Options{Table: "restart"})
			key := "restart-" + distlock.NewToken()
			la, err := a.TryLock(opCtx(t), key, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if crash {
				pgSrv.Kill(t)
			}
			pgSrv.Restart(t)

			// Other clients: ErrLocked once the server answers (transport errors from
			// connections that died with the old server are retried).
			var lastErr error
			if !poll(t, 30*time.Second, func() bool {
				var lb distlock.Lease
				lb, lastErr = b.TryLock(opCtx(t), key, time.Minute)
				if lastErr == nil {
					t.Fatalf("another client acquired %q (Fence %d) after the restart: the lease was lost", key, lb.Fence)
				}
				return errors.Is(lastErr, distlock.ErrLocked)
			}) {
				t.Fatalf("no ErrLocked from another client 30s after the restart: %v", lastErr)
			}
			// The holder renews.
			var next distlock.Lease
			if !poll(t, 30*time.Second, func() bool {
				next, lastErr = a.Renew(opCtx(t), la, time.Minute)
				if errors.Is(lastErr, distlock.ErrNotHeld) {
					t.Fatalf("the holder's Renew after the restart: %v", lastErr)
				}
				return lastErr == nil
			}) {
				t.Fatalf("the holder cannot renew 30s after the restart: %v", lastErr)
			}
			if next.Fence != la.Fence || next.Token != la.Token {
				t.Fatalf("Renew changed the lease: %+v -> %+v", la, next)
			}
			h, err := b.Inspect(opCtx(t), key)
			if err != nil || h.Fence != la.Fence {
				t.Fatalf("Inspect after the restart: %+v, %v; want Fence %d", h, err, la.Fence)
			}
			if err := a.Unlock(opCtx(t), next); err != nil {
				t.Fatal(err)
			}
			lb, err := b.TryLock(opCtx(t), key, time.Minute)
			if err != nil || lb.Fence != la.Fence+1 {
				t.Fatalf("TryLock after Unlock: %+v, %v; want Fence %d", lb, err, la.Fence+1)
			}
			if err := b.Unlock(opCtx(t), lb); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestPostgresWaitSharesListener: concurrent Waits of one Locker share one
// listening connection; a release wakes only the waiters of its key; the
// connection stays open after the last Wait returned, for the next one, until it
// has been idle for a while or Close closes it.
func TestPostgresWaitSharesListener(t *testing.T) {
	a, w := newPG(t, &Options{Table: "waiters"}), newPG(t, &Options{Table: "waiters"})
	const n = 4
	keys := make([]string, n)
	leases := make([]distlock.Lease, n)
	woke := make([]chan error, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("wait-%d-%s", i, distlock.NewToken())
		var err error
		if leases[i], err = a.TryLock(opCtx(t), keys[i], time.Minute); err != nil {
			t.Fatal(err)
		}
		woke[i] = make(chan error, 1)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for i := range keys {
		go func() { woke[i] <- w.Wait(ctx, keys[i]) }()
	}
	// All four join one connection.
	if !poll(t, 10*time.Second, func() bool {
		w.ln.mu.Lock()
		defer w.ln.mu.Unlock()
		return w.ln.cur != nil && len(w.ln.cur.waiters) == n
	}) {
		t.Fatal("the waiters did not all join one listening connection")
	}
	// Release key 0: only its waiter wakes.
	if err := a.Unlock(opCtx(t), leases[0]); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-woke[0]:
		if err != nil {
			t.Fatalf("Wait after Unlock: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return 10s after Unlock")
	}
	for i := 1; i < n; i++ {
		select {
		case err := <-woke[i]:
			t.Fatalf("Wait on %q returned (%v) when another key was released", keys[i], err)
		default:
		}
	}
	cancel()
	for i := 1; i < n; i++ {
		if err := <-woke[i]; !errors.Is(err, distlock.ErrLocked) || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Wait: %v, want ErrLocked joined with context.Canceled", err)
		}
		if err := a.Unlock(opCtx(t), leases[i]); err != nil {
			t.Fatal(err)
		}
	}
	w.ln.mu.Lock()
	cur := w.ln.cur
	w.ln.mu.Unlock()
	if cur == nil {
		t.Fatal("the listening connection closed when the last Wait returned; it must stay for the next")
	}
	// The next Wait joins it.
	la, err := a.TryLock(opCtx(t), keys[0], time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	woke0 := make(chan error, 1)
	go func() { woke0 <- w.Wait(t.Context(), keys[0]) }()
	if !poll(t, 10*time.Second, func() bool {
		w.ln.mu.Lock()
		defer w.ln.mu.Unlock()
		return w.ln.cur != nil && len(w.ln.cur.waiters) == 1
	}) {
		t.Fatal("the next Wait did not join the listening connection")
	}
	w.ln.mu.Lock()
	same := w.ln.cur == cur
	w.ln.mu.Unlock()
	if !same {
		t.Fatal("the next Wait opened another listening connection")
	}
	if err := a.Unlock(opCtx(t), la); err != nil {
		t.Fatal(err)
	}
	if err := <-woke0; err != nil {
		t.Fatalf("Wait after Unlock: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w.ln.mu.Lock()
	now := w.ln.cur
	w.ln.mu.Unlock()
	if now != nil {
		t.Fatal("the listener names a connection after Close")
	}
	select {
	case <-cur.done:
	default:
		t.Fatal("the listening connection's goroutine is still running after Close")
	}
}

// TestPostgresListenerIdleClose: a listening connection closes once it has been
// idle for the listener's idle time, and its goroutine returns; Close wakes a Wait
// in progress.
func TestPostgresListenerIdleClose(t *testing.T) {
	a, w := newPG(t, &Options{Table: "waiters"}), newPG(t, &Options{Table: "waiters"})
	w.ln.idle = 100 * time.Millisecond // before any Wait
	key := "idle-" + distlock.NewToken()
	la, err := a.TryLock(opCtx(t), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Unlock(opCtx(t), la)
	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() { first <- w.Wait(ctx, key) }()
	if !poll(t, 10*time.Second, func() bool {
		w.ln.mu.Lock()
		defer w.ln.mu.Unlock()
		return w.ln.cur != nil && listening(w.ln.cur)
	}) {
		t.Fatal("Wait did not start listening")
	}
	w.ln.mu.Lock()
	lc := w.ln.cur
	w.ln.mu.Unlock()
	cancel()
	if err := <-first; !errors.Is(err, distlock.ErrLocked) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Wait on a held key: %v", err)
	}
	select {
	case <-lc.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the idle listening connection was not closed 10s after its idle time")
	}
	w.ln.mu.Lock()
	cur := w.ln.cur
	w.ln.mu.Unlock()
	if cur != nil {
		t.Fatal("the listener still names a connection after closing it")
	}

	woke := make(chan error, 1)
	go func() { woke <- w.Wait(t.Context(), key) }()
	if !poll(t, 10*time.Second, func() bool {
		w.ln.mu.Lock()
		defer w.ln.mu.Unlock()
		return w.ln.cur != nil && len(w.ln.cur.waiters) == 1 && listening(w.ln.cur)
	}) {
		t.Fatal("Wait did not start listening")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-woke:
		if err != nil {
			t.Fatalf("Wait when its Locker was closed: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return 10s after Close")
	}
}

// TestPostgresWaitFaults: Wait through a partition ends with the context; Wait
// whose connections are cut returns promptly (nil, a hint, when its listening
// connection died; an error when it cannot listen) and never blocks.
func TestPostgresWaitFaults(t *testing.T) {
	a, w := newPG(t, &Options{Table: "waitfaults"}), newPG(t, &Options{Table: "waitfaults"})
	key := "waitfault-" + distlock.NewToken()
	la, err := a.TryLock(opCtx(t), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Unlock(opCtx(t), la)
	p := clientOf(t, w).proxy

	t.Run("Blackhole", func(t *testing.T) {
		p.Blackhole()
		defer p.Heal()
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := w.Wait(ctx, key)
		if took := time.Since(start); took > 3*time.Second {
			t.Fatalf("Wait through a partition took %v with a 500ms context", took)
		}
		if !errors.Is(err, distlock.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait through a partition: %v, want ErrLocked joined with the deadline", err)
		}
	})
	t.Run("CutWhileWaiting", func(t *testing.T) {
		woke := make(chan error, 1)
		go func() { woke <- w.Wait(t.Context(), key) }()
		if !poll(t, 10*time.Second, func() bool {
			w.ln.mu.Lock()
			defer w.ln.mu.Unlock()
			return w.ln.cur != nil && len(w.ln.cur.waiters) == 1
		}) {
			t.Fatal("Wait did not start listening")
		}
		// The waiter may still be reading the row or already waiting: either way
		// the cut must end Wait promptly.
		p.Cut()
		defer p.Heal()
		select {
		case err := <-woke:
			// nil (the listening connection died: the release may have been missed)
			// or the transport error of the row read.
			if errors.Is(err, distlock.ErrLocked) {
				t.Fatalf("Wait on a cut connection: %v, must not claim the key is locked", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Wait did not return 10s after its connections were cut")
		}
	})
	t.Run("CannotListen", func(t *testing.T) {
		p.Cut()
		defer p.Heal()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		err := w.Wait(ctx, key)
		if err == nil || errors.Is(err, distlock.ErrLocked) || ctx.Err() != nil {
			t.Fatalf("Wait that cannot connect: %v, want a prompt transport error", err)
		}
	})
}

// TestPostgresListenerSilent: a listening connection that goes silent (a blackhole
// does not break it) fails the listener's periodic check; the Wait in progress,
// whose notification was lost, returns long before the holder's ttl, and the next
// Wait listens on a new connection.
func TestPostgresListenerSilent(t *testing.T) {
	a, w := newPG(t, &Options{Table: "waiters"}), newPG(t, &Options{Table: "waiters"})
	w.ln.ping = 100 * time.Millisecond // before any Wait
	p := clientOf(t, w).proxy
	key := "silent-" + distlock.NewToken()
	la, err := a.TryLock(opCtx(t), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	acquired := w.ln.pool.Stat().AcquireCount()
	woke := make(chan error, 1)
	go func() { woke <- w.Wait(t.Context(), key) }()
	// Wait listens, then reads the row with a pooled connection (through the
	// proxy): once it gave that back, it only listens.
	if !poll(t, 10*time.Second, func() bool {
		w.ln.mu.Lock()
		defer w.ln.mu.Unlock()
		st := w.ln.pool.Stat()
		return w.ln.cur != nil && len(w.ln.cur.waiters) == 1 && listening(w.ln.cur) &&
			st.AcquireCount() > acquired && st.AcquiredConns() == 0
	}) {
		t.Fatal("Wait did not start listening and read the row")
	}
	select {
	case err := <-woke:
		t.Fatalf("Wait returned %v while the key was held", err)
	default:
	}
	w.ln.mu.Lock()
	first := w.ln.cur
	w.ln.mu.Unlock()
	p.Blackhole()
	start := time.Now()
	if err := a.Unlock(opCtx(t), la); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-woke:
		if err != nil {
			t.Fatalf("Wait whose connection went silent: %v, want nil", err)
		}
		t.Logf("Wait returned %v after the blackhole", time.Since(start))
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return 10s after its connection went silent")
	}
	p.Heal()
	select {
	case <-first.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the silent connection's goroutine did not return")
	}
	if la, err = a.TryLock(opCtx(t), key, time.Minute); err != nil {
		t.Fatal(err)
	}
	woke = make(chan error, 1)
	go func() { woke <- w.Wait(t.Context(), key) }()
	if !poll(t, 10*time.Second, func() bool {
		w.ln.mu.Lock()
		defer w.ln.mu.Unlock()
		return w.ln.cur != nil && w.ln.cur != first && len(w.ln.cur.waiters) == 1 && listening(w.ln.cur)
	}) {
		t.Fatal("the next Wait did not listen on a new connection")
	}
	if err := a.Unlock(opCtx(t), la); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-woke:
		if err != nil {
			t.Fatalf("Wait on the new connection: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait on the new connection did not return 10s after Unlock")
	}
}
