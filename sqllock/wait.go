package sqllock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/waitq"
)

// Polling of the Waits (for the dialects without notifications).
const (
	// minPoll is the first interval between two reads of a waited key's row after
	// its holder changed, or it was found free.
	minPoll = time.Millisecond
	// maxPoll bounds the interval, which doubles while the same lease holds the
	// key (and never passes the holder's expiry).
	maxPoll = 50 * time.Millisecond
)

// A waits shares the polling of the Waits of a Locker: one goroutine per waited
// key reads the key's row, and when it finds the key free (or this Locker's Unlock
// released it) it wakes the first Wait of the key's line (internal/waitq); it
// wakes the next one only once a TryLock of the key started since (the woken one
// lost the race, or took and released the key), or the handoff time passed.
type waits struct {
	q *waitq.Queue

	mu   sync.Mutex
	keys map[string]*pollKey
}

// A pollKey is the polling of one key.
type pollKey struct {
	users    int           // the Waits of the key; guarded by waits.mu
	attempts uint64        // the TryLocks of the key started; guarded by waits.mu
	waking   bool          // a waiter was woken at attempts == wokeAt, at woke
	wokeAt   uint64        // guarded by waits.mu
	woke     time.Time     // guarded by waits.mu
	stop     chan struct{} // closed when the last Wait of the key left
}

// waitsOf returns the Locker's waits, made by the first Wait.
func (l *Locker) waitsOf() *waits {
	if w := l.waits.Load(); w != nil {
		return w
	}
	l.waits.CompareAndSwap(nil, &waits{q: waitq.New(0), keys: make(map[string]*pollKey)})
	return l.waits.Load()
}

// Wait returns nil when key may be free: its row was found free or expired, or
// this Locker's Unlock released it. The Waits of a key on one Locker share one
// poller, which reads the row 1ms after the key changed hands or was found free,
// then at doubling intervals up to 50ms while the same lease holds it (never
// later than its expiry, by the database's clock); a free key wakes one Wait, the
// first to have started, and the next one only once a TryLock of the key has
// started since or 20ms have passed, so that a herd of waiters sends a few reads
// and one TryLock per Locker per release. When ctx ends first it returns
// errors.Join(distlock.ErrLocked, ctx.Err()). A nil return is a hint, not a lease:
// call TryLock.
func (l *Locker) Wait(ctx context.Context, key string) error {
	cctx, end, err := l.calls.Begin(ctx)
	if err != nil {
		return l.opError("Wait", key, err)
	}
	defer end()
	if err := driver.ValidateKey(key, MaxKeyLen); err != nil {
		return l.opError("Wait", key, err)
	}
	w := l.waitsOf()
	qw := w.q.Join(key) // in line before the first read
	defer qw.Leave()
	w.join(l, key)
	defer w.leave(key)
	select {
	case <-qw.Woken():
		return nil
	case <-cctx.Done():
		if errors.Is(context.Cause(cctx), distlock.ErrClosed) {
			return l.opError("Wait", key, distlock.ErrClosed)
		}
		return l.opError("Wait", key, errors.Join(distlock.ErrLocked, ctx.Err()))
	}
}

// join counts a Wait of key and starts its poller if it has none. It runs during
// a call of l (so that Close waits for the poller).
func (w *waits) join(l *Locker, key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	pk := w.keys[key]
	if pk == nil {
		pk = &pollKey{stop: make(chan struct{})}
		w.keys[key] = pk
		l.calls.Go(func() { w.poll(l, key, pk) })
	}
	pk.users++
}

// leave uncounts a Wait of key, stopping the poller after the last.
func (w *waits) leave(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	pk := w.keys[key]
	if pk.users--; pk.users == 0 {
		close(pk.stop)
		delete(w.keys, key)
	}
}

// attempt reports that a TryLock of key starts.
func (w *waits) attempt(key string) {
	w.mu.Lock()
	if pk := w.keys[key]; pk != nil {
		pk.attempts++
	}
	w.mu.Unlock()
	w.q.Attempt(key)
}

// free reports that key was found free, or released by this Locker: it wakes the
// first waiter, unless one woken for the same free key has not tried it yet.
func (w *waits) free(key string) {
	w.mu.Lock()
	pk := w.keys[key]
	if pk == nil {
		w.mu.Unlock()
		return
	}
	now := time.Now()
	if pk.waking && pk.attempts == pk.wokeAt && now.Sub(pk.woke) < waitq.DefaultHandoff {
		w.mu.Unlock()
		return
	}
	pk.waking, pk.wokeAt, pk.woke = true, pk.attempts, now
	w.mu.Unlock()
	w.q.Released(key)
}

// poll reads key's row until the key's last Wait leaves or l closes.
func (w *waits) poll(l *Locker, key string, pk *pollKey) {
	ctx, end, err := l.calls.Begin(context.Background())
	if err != nil {
		return // closed: the Waits return ErrClosed
	}
	defer end()
	r := row(key, "")
	interval := minPoll
	var last int64 = -1
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-pk.stop:
			return
		case <-ctx.Done():
			return
		}
		st, found, err := l.d.Inspect(ctx, r)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			interval = min(2*interval, maxPoll) // try again later
		case !found:
			w.free(key)
			interval, last = minPoll, -1
		case st.Fence != last:
			interval, last = minPoll, st.Fence
		default:
			interval = min(2*interval, maxPoll)
		}
		if found && err == nil {
			// The row expires st.Remaining after the database read its clock,
			// which was after the read was sent: a read then finds it expired.
			interval = min(interval, st.Remaining)
		}
		t.Reset(interval)
	}
}
