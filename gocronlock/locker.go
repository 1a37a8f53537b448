package gocronlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/keytext"
)

// A Locker is gocron's distributed job Locker over a distlock.Locker: pass it to
// gocron.WithDistributedLocker or gocron.WithDistributedJobLocker. Give every
// scheduler its own Locker (over its own backend client, or a shared one). Its
// methods are safe for concurrent use.
type Locker struct {
	l distlock.Locker
	o Options

	mu      sync.Mutex
	closed  bool
	byKey   map[string]*run   // gocron's key -> its latest run, until Unlock
	running map[*run]struct{} // runs not yet unlocked
	wg      sync.WaitGroup    // one per run, until its lease is released
}

var _ gocron.Locker = (*Locker)(nil)

// NewLocker returns a Locker over l. It does no I/O. A nil l or bad options give an
// error wrapping distlock.ErrInvalid.
func NewLocker(l distlock.Locker, opts *Options) (*Locker, error) {
	if l == nil {
		return nil, fmt.Errorf("gocronlock: NewLocker: %w: nil Locker", distlock.ErrInvalid)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Locker{l: l, o: o, byKey: make(map[string]*run), running: make(map[*run]struct{})}, nil
}

// Lock makes one attempt to acquire KeyPrefix + key for TTL (bounded by TTL) and,
// when it succeeds, keeps the lease renewed until Unlock. gocron calls it before
// each run with the job's name, and skips the run when it fails: with an error
// wrapping distlock.ErrLocked when another scheduler holds the key, or
// distlock.ErrClosed after Close.
//
// The returned Lock's Unlock, which gocron calls when the job returns, ends the
// run's Context and releases the key: at once when MinHold has passed since it was
// acquired, else in the background when it passes (Unlock returns nil at once). It
// returns the loss (wrapping distlock.ErrNotHeld) when the lease was lost while the
// job ran, and otherwise the release's error; a second call returns the first
// result. It releases with a context that lives even when Unlock's has ended.
func (lk *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	if lk.isClosed() {
		return nil, lk.closedErr(key)
	}
	tctx, cancel := context.WithTimeout(ctx, lk.o.TTL)
	lease, err := lk.l.TryLock(tctx, lk.o.KeyPrefix+key, lk.o.TTL)
	cancel()
	if err != nil {
		return nil, err
	}
	// gocron's context may end while the job still runs (a shutdown waits for
	// running jobs): the lease lives until Unlock.
	r := lk.start(context.WithoutCancel(ctx), key, lease)

	lk.mu.Lock()
	if lk.closed { // Close ran during the TryLock
		lk.mu.Unlock()
		r.finish(lk.closedErr(key))
		return nil, lk.closedErr(key)
	}
	lk.byKey[key] = r
	lk.running[r] = struct{}{}
	lk.wg.Add(1)
	lk.mu.Unlock()
	return r, nil
}

// Context returns a context derived from ctx that is also cancelled when the run of
// key (gocron's job name) that holds the lease now ends: with a cause wrapping
// distlock.ErrNotHeld when its lease is lost, distlock.ErrClosed when the Locker is
// closed, and another cause at Unlock. When no run of key holds a lease, it
// returns a context that is already cancelled, with a cause wrapping
// distlock.ErrNotHeld. Call it from the job, and do the job's work under it.
func (lk *Locker) Context(ctx context.Context, key string) context.Context {
	lk.mu.Lock()
	r := lk.byKey[key]
	lk.mu.Unlock()
	c, cancel := context.WithCancelCause(ctx)
	if r == nil {
		cancel(fmt.Errorf("gocronlock: job %s: %w: no run of it holds a lease here", keytext.Quote(key), distlock.ErrNotHeld))
		return c
	}
	// r.ctx always ends (at Unlock at the latest), and then so does c.
	context.AfterFunc(r.ctx, func() { cancel(context.Cause(r.ctx)) })
	return c
}

// Lease returns the lease of the run of key (gocron's job name) that holds one now,
// with the latest renewal's Expires; pass its Fence to what the job writes to. ok
// is false when no run of key holds a lease.
func (lk *Locker) Lease(key string) (lease distlock.Lease, ok bool) {
	lk.mu.Lock()
	r := lk.byKey[key]
	lk.mu.Unlock()
	if r == nil {
		return distlock.Lease{}, false
	}
	return r.held.Lease(), true
}

// Close ends the runs whose job has not returned yet (their Context is cancelled
// with a cause wrapping distlock.ErrClosed, and their leases released at once),
// then waits until the leases of the runs that have returned are released at the
// end of their MinHold. Later Locks fail with distlock.ErrClosed. Call it after
// gocron's Shutdown, and before closing the backend. It never closes the
// distlock.Locker. It returns nil, also when called again.
func (lk *Locker) Close() error {
	lk.mu.Lock()
	lk.closed = true
	var runs []*run
	for r := range lk.running {
		runs = append(runs, r)
	}
	lk.mu.Unlock()
	for _, r := range runs {
		r.close()
	}
	lk.wg.Wait()
	return nil
}

func (lk *Locker) isClosed() bool {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.closed
}

func (lk *Locker) closedErr(key string) error {
	return fmt.Errorf("gocronlock: job %s: %w", keytext.Quote(key), distlock.ErrClosed)
}

// forget removes r from the runs that the job's helpers and Close see.
func (lk *Locker) forget(r *run) {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if lk.byKey[r.key] == r {
		delete(lk.byKey, r.key)
	}
	delete(lk.running, r)
}

// errRunEnded is the cause of a run's context after Unlock.
var errRunEnded = errors.New("gocronlock: the job's run ended (Unlock)")

// releaseCtx returns the bounded context of a release, alive even when ctx ended.
func (lk *Locker) releaseCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), lk.o.ReleaseTimeout)
}

// untilMinHold returns how long a lease acquired at acquired must still be held.
func (lk *Locker) untilMinHold(acquired time.Time) time.Duration {
	return time.Until(acquired.Add(lk.o.MinHold))
}
