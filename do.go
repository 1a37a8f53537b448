package distlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultTTL is the ttl Do uses when DoOptions.TTL is zero.
const DefaultTTL = 30 * time.Second

// DoOptions tune Do. A nil *DoOptions means the defaults.
type DoOptions struct {
	// TTL is the lease's ttl; Hold renews it every TTL/3. Default DefaultTTL.
	TTL time.Duration
	// Wait makes Do wait for the key (Lock) instead of returning ErrLocked at once
	// (TryLock). Bound the wait with ctx.
	Wait bool
	// MinHold keeps the key held until at least MinHold after it was acquired, even
	// when fn returns sooner, so a short job cannot run twice on instances whose
	// schedules fire a little apart (ShedLock's lockAtLeastFor). Do then returns no
	// sooner than that. If ctx ends during that wait, Do returns without unlocking and
	// the lease lapses at its Expires.
	MinHold time.Duration
	// ReleaseTimeout bounds the final Unlock, which runs even when ctx has ended.
	// Default 5s.
	ReleaseTimeout time.Duration
	// Lock tunes the wait when Wait is set. Its Observer defaults to Observer.
	Lock LockOptions
	// Every is the renewal period; default TTL/3.
	Every time.Duration
	// Observer sees the acquisition, renewals, a loss and the release.
	Observer Observer
}

func (o *DoOptions) withDefaults() (DoOptions, error) {
	var r DoOptions
	if o != nil {
		r = *o
	}
	if r.TTL < 0 || r.MinHold < 0 || r.ReleaseTimeout < 0 {
		return r, fmt.Errorf("%w: negative DoOptions duration (TTL %v, MinHold %v, ReleaseTimeout %v)", ErrInvalid, r.TTL, r.MinHold, r.ReleaseTimeout)
	}
	if r.TTL == 0 {
		r.TTL = DefaultTTL
	}
	if r.ReleaseTimeout == 0 {
		r.ReleaseTimeout = 5 * time.Second
	}
	if r.Lock.Observer.Logger == nil && r.Lock.Observer.OnEvent == nil {
		r.Lock.Observer = r.Observer
	}
	return r, nil
}

// Do runs fn while it holds key: it acquires key (TryLock, or Lock when opts.Wait),
// keeps the lease alive with Hold, calls fn with the held context, and releases the
// key when fn returns (after MinHold, when set).
//
// fn's context is cancelled when the lease is lost; fn must then stop touching the
// protected resource. Do returns:
//   - an error wrapping ErrLocked when the key is held and opts.Wait is false (fn
//     did not run), or Lock's error when waiting ended;
//   - fn's error, joined with an error wrapping ErrNotHeld when the lease was lost
//     before fn returned (or when only the final Unlock finds it lost, and no
//     renewal after fn returned proved it held), and with the release error, if any.
//
// A panic in fn releases the key and is re-raised.
func Do(ctx context.Context, l Locker, key string, opts *DoOptions, fn func(ctx context.Context) error) (err error) {
	o, err := opts.withDefaults()
	if err != nil {
		return err
	}
	var lease Lease
	start := time.Now()
	if o.Wait {
		lease, err = Lock(ctx, l, key, o.TTL, &o.Lock)
	} else {
		lease, err = l.TryLock(ctx, key, o.TTL)
		took := time.Since(start)
		o.Observer.emit(ctx, Event{Op: OpAttempt, Key: key, Fence: lease.Fence, Took: took, Attempt: 1, Err: err})
		o.Observer.emit(ctx, Event{Op: OpAcquire, Key: key, Fence: lease.Fence, Took: took, Attempt: 1, Err: err})
	}
	if err != nil {
		return err
	}
	acquired := time.Now()
	h := Hold(ctx, l, lease, &HoldOptions{TTL: o.TTL, Every: o.Every, Observer: o.Observer})
	released := false
	defer func() {
		if !released { // fn panicked
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.ReleaseTimeout)
			defer cancel()
			_ = h.Release(rctx)
		}
	}()

	ferr := fn(h.Context())
	lost := h.Err()
	atReturn := h.Lease()

	if wait := time.Until(acquired.Add(o.MinHold)); wait > 0 && lost == nil {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-h.Context().Done():
			t.Stop()
			if ctx.Err() != nil { // the caller gave up: leave the lease to lapse
				released = true
				return ferr
			}
		}
	}

	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.ReleaseTimeout)
	defer cancel()
	rerr := h.Release(rctx)
	released = true
	if lost != nil {
		return errors.Join(ferr, lost)
	}
	if errors.Is(rerr, ErrNotHeld) && (h.Err() != nil || h.Lease() != atReturn) {
		// Hold saw the loss during MinHold, or a renewal after fn returned proved
		// the lease held then: fn's work was done under the lease; not fn's
		// failure. When only the final Unlock finds the lease gone, nothing shows
		// that it outlived fn: the loss is reported.
		rerr = nil
	}
	return errors.Join(ferr, rerr)
}
