// Package memlock is an in-process distlock backend. All clients of one *Locker share
// its state, as clients of one server would. It satisfies the whole distlock contract
// (fences, expiry by ttl, Waiter, Inspector, LossNotifier, LossWatcher), is safe for concurrent use,
// and is what you pick to unit-test code that takes a distlock.Locker: Revoke lets a
// test take a lease away, as a server failover or an expired lease would.
//
// It excludes only goroutines of one process: it is not a distributed lock.
package memlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/waitq"
)

// MaxKeyLen is the longest key, in bytes, that a memlock Locker accepts.
const MaxKeyLen = 1 << 16

// Owner is the owner label that Inspect reports for every holder.
const Owner = "memlock"

// A Locker is an in-process lock table. The zero value is not usable; call New.
type Locker struct {
	mu     sync.Mutex
	keys   map[string]*state
	closed chan struct{} // closed by Close
	// waiters wakes the Waits of a key one at a time: a release wakes the first,
	// the next only if no TryLock of the key follows.
	waiters *waitq.Queue
	core    *driver.Locker // over the table
}

// state is one key's record. It outlives its holders so that fences never repeat.
type state struct {
	fence   uint64
	token   string    // "" when free
	expires time.Time // with a monotonic reading
	// freed is closed, and replaced, whenever the key stops being held (Unlock,
	// Revoke). LossNotifier channels select on it.
	freed chan struct{}
	// onLost are the AfterLost functions to start when the key stops being held.
	onLost []*lossFunc
}

// New returns an empty Locker. It has no client and no options that could be wrong,
// so unlike the other backends' New it takes none and returns no error.
func New() *Locker {
	l := &Locker{keys: make(map[string]*state), closed: make(chan struct{}), waiters: waitq.New(0)}
	core, err := driver.NewLocker((*table)(l), driver.Config{Backend: "memlock", MaxKeyLen: MaxKeyLen})
	if err != nil {
		panic(err) // cannot happen: the table and the Config are valid
	}
	l.core = core
	return l
}

// Close makes every later call fail with an error wrapping distlock.ErrClosed and
// wakes every Wait (with that error). Leases still held stay in the table until
// their Expires; Close does nothing else and is idempotent.
func (l *Locker) Close() error { return l.core.Close() }

// fail wraps err in the *distlock.OpError every backend returns.
func fail(op, key string, err error) error {
	return &distlock.OpError{Backend: "memlock", Op: op, Key: key, Err: err}
}

// check returns the error of a call that must not run: l is closed or ctx is done.
func (l *Locker) check(ctx context.Context) error {
	select {
	case <-l.closed:
		return distlock.ErrClosed
	default:
	}
	return ctx.Err()
}

var (
	_ distlock.Locker       = (*Locker)(nil)
	_ distlock.Waiter       = (*Locker)(nil)
	_ distlock.Inspector    = (*Locker)(nil)
	_ distlock.LossNotifier = (*Locker)(nil)
	_ distlock.LossWatcher  = (*Locker)(nil)
)

// get returns key's state, creating it. l.mu must be held.
func (l *Locker) get(key string) *state {
	s := l.keys[key]
	if s == nil {
		s = &state{freed: make(chan struct{})}
		l.keys[key] = s
	}
	return s
}

// held reports whether s is held at now. l.mu must be held.
func (s *state) held(now time.Time) bool { return s.token != "" && now.Before(s.expires) }

// free marks key's state s free, closes its LossNotifier channel and wakes the
// first Wait on key. l.mu must be held.
func (l *Locker) free(key string, s *state) {
	s.release()
	l.waiters.Released(key)
}

// release marks s free and closes its LossNotifier channel. l.mu must be held.
func (s *state) release() {
	s.token = ""
	close(s.freed)
	s.freed = make(chan struct{})
	s.runLost()
}

// TryLock acquires key for ttl, or returns ErrLocked.
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	return l.core.TryLock(ctx, key, ttl)
}

// Renew extends lease to ttl from now. It never shortens: a ttl below what the lease
// has left keeps the key held as long as before, while the returned Lease's Expires
// is the time before the call + ttl.
func (l *Locker) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	return l.core.Renew(ctx, lease, ttl)
}

// Unlock releases lease.
func (l *Locker) Unlock(ctx context.Context, lease distlock.Lease) error {
	return l.core.Unlock(ctx, lease)
}

// Inspect reports key's holder, or ErrNotHeld when it is free.
func (l *Locker) Inspect(ctx context.Context, key string) (distlock.Holder, error) {
	return l.core.Inspect(ctx, key)
}

// owned returns lease's state when lease still holds its key at now, else nil.
func (l *Locker) owned(lease distlock.Lease, now time.Time) *state {
	s := l.keys[lease.Key]
	if s == nil || s.token != lease.Token || !s.held(now) {
		return nil
	}
	return s
}

// Revoke takes key away from its holder, if any, as an expired lease or a server
// failover would: the holder's Renew and Unlock then return ErrNotHeld and its
// LossNotifier channel is closed. It reports whether key was held.
func (l *Locker) Revoke(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.keys[key]
	if s == nil || !s.held(time.Now()) {
		return false
	}
	l.free(key, s)
	return true
}

// Wait returns when key may be free: at once if it is, else at the holder's expiry
// or when a release (Unlock, Revoke) wakes it. A release wakes one Wait of the key,
// the first to have started; the next one wakes only if no TryLock of the key starts
// soon after (the woken caller gave up), so that a herd of waiters does not rush the
// key at each release.
func (l *Locker) Wait(ctx context.Context, key string) error {
	if err := driver.ValidateKey(key, MaxKeyLen); err != nil {
		return fail("Wait", key, err)
	}
	if err := l.check(context.Background()); err != nil {
		return fail("Wait", key, err)
	}
	l.mu.Lock()
	s := l.get(key)
	now := time.Now()
	if !s.held(now) {
		l.mu.Unlock()
		return nil
	}
	w := l.waiters.Join(key) // under l.mu: no release between the check and here
	left := s.expires.Sub(now)
	l.mu.Unlock()
	defer w.Leave()
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-w.Woken():
		if err := l.check(context.Background()); err != nil {
			return fail("Wait", key, err)
		}
		return nil
	case <-t.C:
		return nil
	case <-l.closed:
		return fail("Wait", key, distlock.ErrClosed)
	case <-ctx.Done():
		return fail("Wait", key, errors.Join(distlock.ErrLocked, ctx.Err()))
	}
}
