package distlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
	parent context.Context // Hold's ctx without its cancellation: what events carry
	ctx    context.Context
	stop   context.CancelCauseFunc
	done   chan struct{} // closed when no renewal runs or will start, and the loss watch ended

	mu    sync.Mutex
	lease Lease
	lost  error // why the lease was lost; nil while held
	// The renewal chain: timer runs the next renewal; armed says it is set and has
	// not fired. active counts what done waits for: the chain, and the goroutine
	// that watches a LossNotifier.
	timer  *time.Timer
	armed  bool
	active int

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
//
// Do the protected work under Context(), and pass Lease().Fence to the resource.
// Always call Release. If ctx ends first, renewal stops and Context() is cancelled, but
// the lease stays on the server until Release or its expiry.
func Hold(ctx context.Context, l Locker, lease Lease, opts *HoldOptions) *Held {
	hctx, stop := context.WithCancelCause(ctx)
	h := &Held{l: l, parent: context.WithoutCancel(ctx), ctx: hctx, stop: stop, done: make(chan struct{}), lease: lease}
	err := ValidateLease(lease)
	var o HoldOptions
	if err == nil {
		o, err = opts.withDefaults(lease)
	}
	if err != nil {
		h.lost = err
		stop(err)
		close(h.done)
		return h
	}
	h.o = o
	o.Observer.emit(h.parent, Event{Op: OpHold, Key: lease.Key, Fence: lease.Fence})
	h.start(lease)
	return h
}

// Context returns a context that is cancelled when the lease is lost (cause wraps
// ErrNotHeld: test it with errors.Is(context.Cause(ctx), ErrNotHeld)), when it is
// released, or when Hold's ctx ends.
func (h *Held) Context() context.Context { return h.ctx }

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

// Release stops renewal, waits until no renewal is in flight, then unlocks the lease
// with ctx and cancels Context(). It returns the loss error (wrapping ErrNotHeld) when
// the lease had been lost (it still tries the Unlock, so that a lease that is only
// suspected lost does not block the key until its ttl), and otherwise Unlock's error. Calling it again returns the
// first result.
func (h *Held) Release(ctx context.Context) error {
	h.release.Do(func() {
		h.stop(errReleased)
		<-h.done
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

func (h *Held) lose(err error) {
	h.mu.Lock()
	h.lost = err
	lease := h.lease
	h.mu.Unlock()
	h.stop(err)
	h.o.Observer.emit(h.parent, Event{Op: OpLost, Key: lease.Key, Fence: lease.Fence, Err: err})
}

// start arms the first renewal, stops the chain when Context ends, and watches
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
	var stopLoss func() bool
	switch {
	case watcher:
		stopLoss = w.AfterLost(lease, func() {
			if h.ctx.Err() == nil {
				h.lose(lossErr(lease.Key))
			}
			h.end()
		})
	case lost != nil:
		go h.watchLoss(lease.Key, lost)
	}
	if stopLoss == nil {
		context.AfterFunc(h.ctx, h.disarm)
		return
	}
	// One AfterFunc for both (each costs heap per held lease).
	context.AfterFunc(h.ctx, func() {
		h.disarm()
		if stopLoss() {
			h.end()
		}
	})
}

// lossErr is the error of a lease that its Locker reported lost.
func lossErr(key string) error {
	return fmt.Errorf("%w: key %q: the backend reported the lease lost", ErrNotHeld, key)
}

// watchLoss cancels Context as soon as the LossNotifier's channel lost closes.
func (h *Held) watchLoss(key string, lost <-chan struct{}) {
	select {
	case <-lost:
		h.lose(lossErr(key))
	case <-h.ctx.Done():
	}
	h.end()
}

// end counts one of the things done waits for as ended.
func (h *Held) end() {
	h.mu.Lock()
	h.ended()
	h.mu.Unlock()
}

// disarm runs when Context ends: it stops a renewal that has not started; one in
// flight sees the end when it returns.
func (h *Held) disarm() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.armed && h.timer.Stop() {
		h.armed = false
		h.ended()
	}
}

// ended counts one of the things done waits for as ended. h.mu is held.
func (h *Held) ended() {
	if h.active--; h.active == 0 {
		close(h.done)
	}
}

// renew is the renewal chain's timer function: it renews the lease (or finds it
// expired) and arms the next renewal.
func (h *Held) renew() {
	h.mu.Lock()
	h.armed = false
	lease := h.lease
	h.mu.Unlock()
	next, retry := h.renewOnce(lease)
	h.mu.Lock()
	defer h.mu.Unlock()
	if next <= 0 || h.ctx.Err() != nil {
		h.ended()
		return
	}
	if retry {
		next = retryDelay(h.o.Every)
	}
	h.armed = true
	h.timer.Reset(h.wait(h.lease, next))
}

// renewOnce makes one renewal of lease. It returns the wait before the next one and
// whether that is a retry, or 0 when the chain ends (Context ended, or the lease is
// lost).
func (h *Held) renewOnce(lease Lease) (next time.Duration, retry bool) {
	if h.ctx.Err() != nil {
		return 0, false
	}
	if lease.Remaining() <= 0 {
		// The expiry came first, or the timer fired late (a pause): never renew
		// past Expires.
		h.lose(fmt.Errorf("%w: key %q: lease expired before a renewal succeeded", ErrNotHeld, lease.Key))
		return 0, false
	}
	start := time.Now()
	rctx, cancel := context.WithDeadline(h.ctx, lease.Expires)
	renewed, err := h.l.Renew(rctx, lease, h.o.TTL)
	cancel()
	h.o.Observer.emit(h.parent, Event{Op: OpRenew, Key: lease.Key, Fence: lease.Fence, Took: time.Since(start), Err: err})
	switch {
	case err == nil:
		h.mu.Lock()
		h.lease = renewed
		h.mu.Unlock()
		return h.period(renewed), false
	case h.ctx.Err() != nil:
		return 0, false
	case errors.Is(err, ErrNotHeld):
		h.lose(fmt.Errorf("key %q: renew: %w", lease.Key, err))
		return 0, false
	case errors.Is(err, ErrInvalid):
		h.lose(fmt.Errorf("%w: key %q: renew: %w", ErrNotHeld, lease.Key, err))
		return 0, false
	default:
		// Transient: try again soon; the lease's Expires bounds the retries.
		return 1, true
	}
}

// wait is how long the chain's timer waits for a renewal due after d: no later than
// lease's Expires, when the renewal finds it expired and the loss is reported.
func (h *Held) wait(lease Lease, d time.Duration) time.Duration {
	return max(min(d, lease.Remaining()), 0)
}

// period is the wait before the next renewal: Every, or a third of the lease's
// remaining time when the backend granted less than TTL (ZooKeeper caps Expires at
// the session timeout, RedLock subtracts clock drift).
func (h *Held) period(lease Lease) time.Duration {
	return max(min(h.o.Every, lease.Remaining()/3), time.Millisecond)
}

// retryDelay is the pause before retrying a failed renewal: a tenth of the period,
// between 5ms and 1s, with jitter.
func retryDelay(every time.Duration) time.Duration {
	d := min(max(every/10, 5*time.Millisecond), time.Second)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}
