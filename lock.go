package distlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// LockOptions tune Lock. A nil *LockOptions means the defaults.
type LockOptions struct {
	// MinBackoff and MaxBackoff bound the full-jitter exponential backoff between
	// attempts when the Locker has no Waiter (or its Wait fails): the n-th sleep is
	// uniform in (0, min(MaxBackoff, MinBackoff*2^n)]. Defaults 10ms and 1s.
	MinBackoff, MaxBackoff time.Duration
	// MaxWait bounds each call of the Locker's Wait, so that a lost wake-up costs at
	// most MaxWait: each call is cut at a uniform random time in [MaxWait/2,
	// MaxWait], so that waiters that began together do not all try again together.
	// Default 5s.
	MaxWait time.Duration
	// Observer sees the acquisition.
	Observer Observer
}

func (o *LockOptions) withDefaults() (LockOptions, error) {
	var r LockOptions
	if o != nil {
		r = *o
	}
	if r.MinBackoff < 0 || r.MaxBackoff < 0 || r.MaxWait < 0 {
		return r, fmt.Errorf("%w: negative LockOptions duration (MinBackoff %v, MaxBackoff %v, MaxWait %v)", ErrInvalid, r.MinBackoff, r.MaxBackoff, r.MaxWait)
	}
	if r.MinBackoff == 0 {
		r.MinBackoff = 10 * time.Millisecond
	}
	if r.MaxBackoff == 0 {
		r.MaxBackoff = time.Second
	}
	if r.MaxBackoff < r.MinBackoff {
		return r, fmt.Errorf("%w: LockOptions.MaxBackoff %v is below MinBackoff %v", ErrInvalid, r.MaxBackoff, r.MinBackoff)
	}
	if r.MaxWait == 0 {
		r.MaxWait = 5 * time.Second
	}
	return r, nil
}

// backoff returns the full-jitter sleep before attempt n (n >= 0).
func (o LockOptions) backoff(n int) time.Duration {
	ceil := o.MaxBackoff
	if n < 32 && o.MinBackoff<<n < ceil && o.MinBackoff<<n > 0 {
		ceil = o.MinBackoff << n
	}
	return time.Duration(rand.Int64N(int64(ceil))) + 1
}

// maxWait returns the bound of one call of Wait: uniform in [MaxWait/2, MaxWait].
func (o LockOptions) maxWait() time.Duration {
	half := o.MaxWait / 2
	return o.MaxWait - half + time.Duration(rand.Int64N(int64(half)+1))
}

// Lock blocks until it acquires key for ttl or ctx ends. Between attempts it uses the
// Locker's Wait when l is a Waiter (each call bounded by MaxWait), else full-jitter
// exponential backoff, cut short at the holder's expiry when l is an Inspector; it
// never busy-loops.
//
// Errors other than ErrLocked (a server that is down, say) are retried the same way
// until ctx ends, except ErrInvalid and ErrClosed, which are returned at once. When
// ctx ends first, Lock returns errors.Join(err, ctx.Err()) where err is the last
// attempt's error (an attempt that ctx's end cut short does not count): so
// errors.Is(err, ErrLocked) tells contention from an unreachable backend, and
// errors.Is(err, context.DeadlineExceeded) tells that the caller gave up.
func Lock(ctx context.Context, l Locker, key string, ttl time.Duration, opts *LockOptions) (Lease, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return Lease{}, err
	}
	lk := locking{o: o, l: l, key: key, ttl: ttl, start: time.Now()}
	lease, err := lk.run(ctx)
	o.Observer.emit(ctx, Event{Op: OpAcquire, Key: key, Fence: lease.Fence, Took: time.Since(lk.start), Attempt: lk.attempts, Err: err})
	return lease, err
}

// locking is one call of Lock.
type locking struct {
	o        LockOptions
	l        Locker
	key      string
	ttl      time.Duration
	start    time.Time
	attempts int
}

// try makes one attempt and reports it to the Observer.
func (lk *locking) try(ctx context.Context) (Lease, error) {
	lk.attempts++
	t0 := time.Now()
	lease, err := lk.l.TryLock(ctx, lk.key, lk.ttl)
	lk.o.Observer.emit(ctx, Event{Op: OpAttempt, Key: lk.key, Fence: lease.Fence, Took: time.Since(t0), Attempt: lk.attempts, Err: err})
	return lease, err
}

func (lk *locking) run(ctx context.Context) (Lease, error) {
	o, l, key := lk.o, lk.l, lk.key
	w, _ := l.(Waiter)
	in, _ := l.(Inspector)
	var seen error // the last attempt's error that ctx's end did not cause
	for n := 0; ; {
		lease, err := lk.try(ctx)
		if err == nil {
			return lease, nil
		}
		if errors.Is(err, ErrInvalid) || errors.Is(err, ErrClosed) {
			return Lease{}, err
		}
		if cut := cutShort(ctx, err); cut || ctx.Err() != nil {
			if cut && seen != nil {
				// ctx's end cut this attempt short (a dial that timed out at the
				// deadline, say): what the attempts found before it is the answer.
				err = seen
			}
			<-ctx.Done() // a millisecond away at most
			return Lease{}, giveUp(err, ctx)
		}
		seen = err
		if w != nil && errors.Is(err, ErrLocked) {
			wctx, cancel := context.WithTimeout(ctx, o.maxWait())
			t0 := time.Now()
			werr := w.Wait(wctx, key)
			cancel()
			o.Observer.emit(ctx, Event{Op: OpWait, Key: key, Took: time.Since(t0), Err: werr})
			switch {
			case ctx.Err() != nil:
				return Lease{}, giveUp(err, ctx)
			case werr == nil, errors.Is(werr, ErrLocked):
				// Freed, or MaxWait passed: try again at once.
				n = 0
				continue
			case errors.Is(werr, ErrInvalid), errors.Is(werr, ErrClosed):
				return Lease{}, werr
			}
			// Wait itself failed: fall back to backoff.
		}
		pause := o.backoff(n)
		if w == nil && in != nil && errors.Is(err, ErrLocked) {
			// Poll no later than the holder's expiry, so an abandoned key is taken
			// as soon as it lapses rather than up to MaxBackoff after.
			if h, ierr := in.Inspect(ctx, key); ierr == nil {
				pause = min(pause, max(time.Until(h.Expires), 0)+time.Millisecond)
			} else if errors.Is(ierr, ErrNotHeld) {
				continue // freed meanwhile
			}
		}
		t0 := time.Now()
		t := time.NewTimer(pause)
		select {
		case <-t.C:
			o.Observer.emit(ctx, Event{Op: OpWait, Key: key, Took: time.Since(t0)})
		case <-ctx.Done():
			t.Stop()
			return Lease{}, giveUp(err, ctx)
		}
		n++
	}
}

// cutShort reports whether err is ctx's end cutting an attempt short: ctx's error,
// or a timeout at ctx's deadline that came a hair before ctx's own timer (a dial
// with the same deadline).
func cutShort(ctx context.Context, err error) bool {
	if cerr := ctx.Err(); cerr != nil {
		return errors.Is(err, cerr)
	}
	d, ok := ctx.Deadline()
	return ok && time.Until(d) <= time.Millisecond && errors.Is(err, context.DeadlineExceeded)
}

func giveUp(last error, ctx context.Context) error {
	if errors.Is(last, ctx.Err()) {
		return last
	}
	return errors.Join(last, ctx.Err())
}
