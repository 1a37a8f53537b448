package distlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// HoldOptions tune Hold. A nil *HoldOptions means the defaults.
type HoldOptions struct {
	// TTL is the ttl of every renewal. Default: the lease's remaining time when Hold
	// is called, which is a little below the ttl it was acquired with; pass that ttl
	// when you know it (backends with whole-second ttls, such as etcd, then renew the
	// same lease instead of moving the key to a new one).
	TTL time.Duration
	// Every is the renewal period. Default TTL/3. It must be below TTL. When a
	// renewal returns a lease with less than 3*Every left, the next one comes after a
	// third of what is left instead.
	Every time.Duration
	// Observer sees renewals and the loss.
	Observer Observer
}

func (o *HoldOptions) withDefaults(lease Lease) (HoldOptions, error) {
	var r HoldOptions
	if o != nil {
		r = *o
	}
	if r.TTL < 0 || r.Every < 0 {
		return r, fmt.Errorf("%w: negative HoldOptions duration (TTL %v, Every %v)", ErrInvalid, r.TTL, r.Every)
	}
	if r.TTL == 0 {
		r.TTL = lease.Remaining()
		if r.TTL <= 0 {
			return r, fmt.Errorf("%w: lease for key %q expired before Hold", ErrNotHeld, lease.Key)
		}
	}
	if r.Every == 0 {
		r.Every = r.TTL / 3
	}
	if r.Every >= r.TTL {
		return r, fmt.Errorf("%w: HoldOptions.Every %v is not below TTL %v", ErrInvalid, r.Every, r.TTL)
	}
	return r, nil
}

// Held is a lease kept alive in the background by Hold. Its methods are safe for
// concurrent use.
//
// A Held costs no goroutine while it waits for its next renewal (a timer runs each
// renewal), so a process can hold many leases cheaply; on a Locker that is a
// LossNotifier but no LossWatcher it keeps one goroutine that waits for the loss
// signal.
type Held struct {
	l      Locker
	o      HoldOptions
	parent context.Context // Hold's ctx

	mu    sync.Mutex
	lease Lease
	lost  error // why the lease was lost; nil while held
	// cause is why the Held stopped (the lease lost or released, Hold's ctx ended);
	// nil while it runs. ctx is Context(), made by its first call (most Helds are
	// never asked for it, and a context per lease is much of a Held's memory), and
	// cancel cancels it.
	cause  error
	ctx    context.Context
	cancel context.CancelCauseFunc
	// The renewal chain: timer runs the next renewal; armed says it is set and has
	// not fired; renewing cancels the renewal in flight. active counts what Release
	// waits for: the chain, and the loss watch. done, made by a Release that has to
	// wait, is closed when active reaches 0.
	timer    *time.Timer
	armed    bool
	active   int
	renewing context.CancelFunc
	done     chan struct{}
	// unwatch stops the watch of Hold's ctx, stopLoss the Locker's AfterLost.
	unwatch  func() bool
	stopLoss func() bool

	release    sync.Once
	releaseErr error
}

// errReleased is the cause of a Held's context after Release.
var errReleased = errors.New("distlock: lease released")

// Hold keeps lease alive: it renews it every opts.Every with opts.TTL until Release
// or until ctx ends. It retries a renewal that fails with a transient error (not
// ErrNotHeld) until the lease's Expires; when the lease is lost — Renew says
// ErrNotHeld, Expires passes before a renewal succeeds, or the Locker's LossNotifier
// reports it — it cancels Context() with a cause that wraps ErrNotHeld, at once.
// Context() ends by the lease's Expires on the local monotonic clock whatever the
// Locker does: a Renew that does not return by its ctx's deadline (Expires) cannot
// keep it alive.
//
// Do the protected work under Context(), and pass Lease().Fence to the resource.
// Always call Release. If ctx ends first, renewal stops and Context() is cancelled, but
// the lease stays on the server until Release or its expiry.
func Hold(ctx context.Context, l Locker, lease Lease, opts *HoldOptions) *Held {
	h := &Held{l: l, parent: ctx, lease: lease}
	err := validLease(lease)
	var o HoldOptions
	if err == nil {
		o, err = opts.withDefaults(lease)
	}
	if err != nil {
		h.lost = err
		h.halt(err)
		return h
	}
	h.o = o
	h.emit(Event{Op: OpHold, Key: lease.Key, Fence: lease.Fence})
	h.start(lease)
	return h
}

// Context returns a context that is cancelled when the lease is lost (cause wraps
// ErrNotHeld: test it with errors.Is(context.Cause(ctx), ErrNotHeld)), when it is
// released, or when Hold's ctx ends.
func (h *Held) Context() context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx == nil {
		// Made from Hold's ctx, it is cancelled already when that has ended, with
		// its error and cause.
		h.ctx, h.cancel = context.WithCancelCause(h.parent)
		if h.cause != nil {
			h.cancel(h.cause)
		}
	}
	return h.ctx
}

// Lease returns the latest renewed lease.
func (h *Held) Lease() Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease
}

// Err returns nil while the lease is held, and the reason (wrapping ErrNotHeld) once
// it has been lost.
func (h *Held) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost
}

// Release stops renewal, waits until no renewal is in flight (or until ctx ends), then
// unlocks the lease with ctx and cancels Context(). It returns the loss error (wrapping ErrNotHeld) when
// the lease had been lost (it still tries the Unlock, so that a lease that is only
// suspected lost does not block the key until its ttl), and otherwise Unlock's error. Calling it again returns the
// first result.
func (h *Held) Release(ctx context.Context) error {
	h.release.Do(func() {
		h.halt(errReleased)
		h.mu.Lock()
		var wait chan struct{}
		if h.active > 0 {
			if h.done == nil {
				h.done = make(chan struct{})
			}
			wait = h.done
		}
		h.mu.Unlock()
		if wait != nil {
			// A renewal in flight was cancelled by halt; one that does not return
			// (a Renew that overstays its ctx) holds Release up only until ctx ends,
			// and then Unlock returns at once with ctx's error.
			select {
			case <-wait:
			case <-ctx.Done():
			}
		}
		lease := h.Lease()
		if err := h.Err(); err != nil && h.o.TTL == 0 {
			h.releaseErr = err // Hold refused the lease or its options: not ours to touch
			return
		} else if err != nil {
			// The lease may still be on the server (its renewals failed, or the
			// backend only suspects a loss): give it back if it is; Unlock's owner
			// check makes this harmless when someone else holds the key now.
			_ = h.l.Unlock(ctx, lease)
			h.releaseErr = err
			return
		}
		start := time.Now()
		err := h.l.Unlock(ctx, lease)
		h.o.Observer.emit(ctx, Event{Op: OpRelease, Key: lease.Key, Fence: lease.Fence, Took: time.Since(start), Err: err})
		h.releaseErr = err
	})
	return h.releaseErr
}

// emit reports ev to the Observer with Hold's ctx, without its cancellation.
func (h *Held) emit(ev Event) {
	if h.o.Observer.OnEvent != nil || h.o.Observer.Logger != nil {
		h.o.Observer.emit(context.WithoutCancel(h.parent), ev)
	}
}

// lose stops the Held for the loss err, unless it has stopped already.
func (h *Held) lose(err error) {
	h.mu.Lock()
	if h.cause != nil {
		h.mu.Unlock()
		return
	}
	h.lost = err
	lease := h.lease
	h.mu.Unlock()
	h.halt(err)
	h.emit(Event{Op: OpLost, Key: lease.Key, Fence: lease.Fence, Err: err})
}

// halt stops the Held for cause, once: it cancels Context() and the renewal in
// flight, disarms the chain, and stops the watches of Hold's ctx and of the loss.
func (h *Held) halt(cause error) {
	h.mu.Lock()
	if h.cause != nil {
		h.mu.Unlock()
		return
	}
	h.cause = cause
	cancel, renewing, unwatch, stopLoss := h.cancel, h.renewing, h.unwatch, h.stopLoss
	if h.armed && h.timer.Stop() {
		h.armed = false
		h.ended()
	}
	h.mu.Unlock()
	if cancel != nil {
		cancel(cause)
	}
	if renewing != nil {
		renewing()
	}
	if unwatch != nil {
		unwatch()
	}
	if stopLoss != nil && stopLoss() {
		h.end() // the loss callback will not run
	}
}

// halted reports whether the Held has stopped.
func (h *Held) halted() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cause != nil
}

// start arms the first renewal, stops the Held when Hold's ctx ends, and watches
// the Locker's loss signal if it has one: through AfterLost, with no goroutine,
// when the Locker is a LossWatcher.
func (h *Held) start(lease Lease) {
	var lost <-chan struct{}
	w, watcher := h.l.(LossWatcher)
	if n, ok := h.l.(LossNotifier); ok && !watcher {
		lost = n.Lost(lease)
	}
	h.mu.Lock()
	h.active = 1
	h.armed = true
	h.timer = time.AfterFunc(h.wait(lease, h.period(lease)), h.renew)
	if watcher || lost != nil {
		h.active++
	}
	h.mu.Unlock()
	switch {
	case watcher:
		stop := w.AfterLost(lease, h.onLost)
		h.mu.Lock()
		h.stopLoss = stop
		halted := h.cause != nil
		h.mu.Unlock()
		if halted && stop() {
			h.end() // halted before stopLoss was set
		}
	case lost != nil:
		go h.watchLoss(lease.Key, lost, h.Context().Done())
	}
	if h.parent.Done() != nil {
		unwatch := context.AfterFunc(h.parent, func() { h.halt(context.Cause(h.parent)) })
		h.mu.Lock()
		h.unwatch = unwatch
		halted := h.cause != nil
		h.mu.Unlock()
		if halted {
			unwatch()
		}
	}
}

// onLost is the LossWatcher's callback.
func (h *Held) onLost() {
	if !h.halted() {
		h.lose(lossErr(h.Lease().Key))
	}
	h.end()
}

// lossErr is the error of a lease that the backend reported lost.
func lossErr(key string) error {
	return fmt.Errorf("%w: key %q: the backend reported the lease lost", ErrNotHeld, key)
}

// watchLoss waits for a LossNotifier's signal, or for the Held to stop.
func (h *Held) watchLoss(key string, lost, stopped <-chan struct{}) {
	select {
	case <-lost:
		h.lose(lossErr(key))
	case <-stopped:
	}
	h.end()
}

// end ends one of what Release waits for.
func (h *Held) end() {
	h.mu.Lock()
	h.ended()
	h.mu.Unlock()
}

// ended counts one of what Release waits for as ended. h.mu is held.
func (h *Held) ended() {
	if h.active--; h.active == 0 && h.done != nil {
		close(h.done)
	}
}

// validLease returns an error wrapping ErrInvalid when lease cannot have come from a
// TryLock: it is zero, or its Key or Token is empty.
func validLease(lease Lease) error {
	switch {
	case lease.IsZero():
		return fmt.Errorf("%w: zero Lease", ErrInvalid)
	case lease.Key == "" || lease.Token == "":
		return fmt.Errorf("%w: Lease with an empty Key or Token", ErrInvalid)
	}
	return nil
}
