package driver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock"
)

// A Locker is the core that turns a Driver into a distlock.Locker: every rule of
// the contract that is not the store's own lives here, once, for every backend
// built on it. It is safe for concurrent use.
type Locker struct {
	d     Driver
	c     Config
	calls *Calls
}

var _ distlock.Locker = (*Locker)(nil)

// NewLocker returns the Locker of d. It returns an *distlock.OpError wrapping
// distlock.ErrInvalid when d is nil or c is invalid.
func NewLocker(d Driver, c Config) (*Locker, error) {
	switch {
	case d == nil:
		return nil, &distlock.OpError{Backend: c.Backend, Op: "New", Err: fmt.Errorf("%w: nil Driver", distlock.ErrInvalid)}
	case c.Backend == "":
		return nil, &distlock.OpError{Op: "New", Err: fmt.Errorf("%w: empty Config.Backend", distlock.ErrInvalid)}
	case c.MaxKeyLen < 0 || c.CleanupTimeout < 0:
		return nil, &distlock.OpError{Backend: c.Backend, Op: "New", Err: fmt.Errorf("%w: negative Config.MaxKeyLen or Config.CleanupTimeout", distlock.ErrInvalid)}
	}
	if c.CleanupTimeout == 0 {
		c.CleanupTimeout = DefaultCleanupTimeout
	}
	return &Locker{d: d, c: c, calls: NewCalls()}, nil
}

// Calls returns the call lifecycle of l, for the Driver's own calls (a Wait, a
// Prune) and background work: Close ends them and waits for them, too.
func (l *Locker) Calls() *Calls { return l.calls }

// Close gives every backend built on the core one meaning of Close:
//   - calls in flight return at once, with an error wrapping distlock.ErrClosed
//     (unless they were done), and every later call returns one; a call whose
//     context can never end (context.Background) may run its request on the
//     caller's goroutine (see Calls.Begin) and then returns when that request
//     ends, bounded by the Driver's request timeout, not at once;
//   - the clean-ups of abandoned Acquires run to their end, each bounded by
//     Config.CleanupTimeout, so that no half-made lock is left behind;
//   - held leases are not released: each stays held until its Expires, as if its
//     holder had crashed (Unlock them before Close to free them at once);
//   - the Driver's own Close, if it has one, runs last.
//
// Close waits for all of that. It is idempotent: a later call waits for the first
// and returns nil.
func (l *Locker) Close() error {
	if !l.calls.Close() {
		return nil
	}
	if c, ok := l.d.(Closer); ok {
		if err := c.Close(); err != nil {
			return l.opError("Close", "", err)
		}
	}
	return nil
}

// TryLock makes one attempt to acquire key for ttl. It returns an error wrapping
// distlock.ErrLocked when another lease holds key. The Lease's Expires counts from
// before the request was sent, minus the drift allowance; a reply that comes after
// that is an error, not an expired Lease. When the outcome is unknown (ctx ended,
// the connection broke, the reply was late), TryLock returns an error and the
// Driver's Abandon runs in the background until it succeeds or
// Config.CleanupTimeout ends.
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	start := time.Now() // first: Expires must not count from later than the caller's start
	cctx, end, err := l.calls.Begin(ctx)
	if err != nil {
		return distlock.Lease{}, l.opError("TryLock", key, err)
	}
	defer end()
	lease, err := l.tryLock(cctx, key, ttl, start)
	if err != nil {
		return distlock.Lease{}, l.opError("TryLock", key, Err(cctx, err))
	}
	return lease, nil
}

func (l *Locker) tryLock(ctx context.Context, key string, ttl time.Duration, start time.Time) (distlock.Lease, error) {
	if err := ValidateKey(key, l.c.MaxKeyLen); err != nil {
		return distlock.Lease{}, err
	}
	if err := ValidateTTL(ttl); err != nil {
		return distlock.Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return distlock.Lease{}, err
	}
	token := NewToken()
	var fence uint64
	err := l.retry(ctx, func() error {
		var err error
		fence, err = l.d.Acquire(ctx, key, token, ttl)
		return err
	})
	switch {
	case errors.Is(err, distlock.ErrLocked):
		return distlock.Lease{}, err
	case err != nil && l.definite(err):
		return distlock.Lease{}, err
	case err != nil:
		l.abandon(ctx, key, token, ttl, err)
		return distlock.Lease{}, fmt.Errorf("outcome unknown, anything it took is being released: %w", err)
	case fence == 0:
		l.abandon(ctx, key, token, ttl, errZeroFence)
		return distlock.Lease{}, errZeroFence
	}
	expires, err := l.expires(start, ttl)
	if err != nil {
		l.abandon(ctx, key, token, ttl, err)
		return distlock.Lease{}, fmt.Errorf("%w; what it took is being released", err)
	}
	return distlock.Lease{Key: key, Token: token, Fence: fence, Expires: expires}, nil
}

var errZeroFence = errors.New("the store returned fence 0 (fences start at 1)")

// expires returns the Expires of a lease granted for ttl by a request sent after
// start, or an error when that moment has already passed.
func (l *Locker) expires(start time.Time, ttl time.Duration) (time.Time, error) {
	expires := start.Add(ttl)
	if l.c.Drift != nil {
		expires = expires.Add(-l.c.Drift(ttl))
	}
	if now := time.Now(); !expires.After(now) {
		return time.Time{}, fmt.Errorf("the reply came %v after the request, later than ttl %v less the drift allowance: the lease had already expired",
			now.Sub(start).Round(time.Microsecond), ttl)
	}
	return expires, nil
}

// abandon runs the Driver's Abandon in the background, with a fresh context bounded
// by Config.CleanupTimeout (never the caller's, which may be what ended the
// attempt), until it succeeds or that context ends. It is called during a call, so
// that Close waits for it.
func (l *Locker) abandon(ctx context.Context, key, token string, ttl time.Duration, cause error) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.c.CleanupTimeout)
	l.calls.Go(func() {
		defer cancel()
		for attempt := 1; l.d.Abandon(actx, key, token, ttl, cause) != nil; attempt++ {
			if Pause(actx, attempt, 100*time.Millisecond) != nil {
				return // the key frees by its ttl
			}
		}
	})
}

// Renew moves the lease's expiry to ttl from now on the store's clock if the lease
// still holds its key, and returns the new Lease (same Token and Fence). It never
// shortens what the store holds, so after a Renew whose outcome is unknown the old
// Lease's Expires still stands. A reply that comes after ttl is an error. It returns
// an error wrapping distlock.ErrNotHeld when the lease was lost, and at once,
// without a request, once the lease's Expires has passed: the holder was told the
// lease ends then, and it must not come back.
func (l *Locker) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	start := time.Now()
	cctx, end, err := l.calls.Begin(ctx)
	if err != nil {
		return distlock.Lease{}, l.opError("Renew", lease.Key, err)
	}
	defer end()
	if err := l.renew(cctx, &lease, ttl, start); err != nil {
		return distlock.Lease{}, l.opError("Renew", lease.Key, Err(cctx, err))
	}
	return lease, nil
}

// renew renews *lease and sets its Expires. Its error paths are calls, so that its
// frame stays small: Hold runs each renewal on a fresh goroutine, whose stack a
// large frame makes grow (and copy) on every renewal.
func (l *Locker) renew(ctx context.Context, lease *distlock.Lease, ttl time.Duration, start time.Time) error {
	if err := l.validLease(*lease); err != nil {
		return err
	}
	if err := ValidateTTL(ttl); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if !start.Before(lease.Expires) {
		return lapsed(start, lease.Expires)
	}
	var err error
	if c, ok := l.d.(Classifier); ok {
		err = Retry(ctx, c.Retryable, func() error { return l.d.Renew(ctx, *lease, ttl) })
	} else {
		err = l.d.Renew(ctx, *lease, ttl)
	}
	if err != nil {
		return err
	}
	expires, err := l.expires(start, ttl)
	if err != nil {
		return stands(err)
	}
	lease.Expires = expires
	return nil
}

// lapsed is Renew's error for a lease whose Expires passed before its start.
//
//go:noinline
func lapsed(start, expires time.Time) error {
	return fmt.Errorf("the lease's Expires passed %v before the Renew: %w",
		start.Sub(expires).Round(time.Millisecond), distlock.ErrNotHeld)
}

// stands is Renew's error err for a renewal answered after its new Expires: the
// store never shortens, so the old Lease still bounds the hold.
//
//go:noinline
func stands(err error) error {
	return fmt.Errorf("%w (the old Lease's Expires still stands)", err)
}

// Unlock releases the lease. It returns an error wrapping distlock.ErrNotHeld when
// the lease no longer held its key (it expired, or another lease holds the key).
func (l *Locker) Unlock(ctx context.Context, lease distlock.Lease) error {
	cctx, end, err := l.calls.Begin(ctx)
	if err != nil {
		return l.opError("Unlock", lease.Key, err)
	}
	defer end()
	err = l.validLease(lease)
	if err == nil {
		err = cctx.Err()
	}
	if err == nil {
		err = l.retry(cctx, func() error { return l.d.Release(cctx, lease) })
	}
	if err != nil {
		return l.opError("Unlock", lease.Key, Err(cctx, err))
	}
	return nil
}

// validLease returns an error wrapping distlock.ErrInvalid when lease cannot have
// come from this Locker's TryLock.
func (l *Locker) validLease(lease distlock.Lease) error {
	if err := ValidateLease(lease); err != nil {
		return err
	}
	return ValidateKey(lease.Key, l.c.MaxKeyLen)
}

// retry runs op, again while the Driver calls its error Retryable.
func (l *Locker) retry(ctx context.Context, op func() error) error {
	c, ok := l.d.(Classifier)
	if !ok {
		return op()
	}
	return Retry(ctx, c.Retryable, op)
}

// definite reports whether err, from an Acquire, leaves no doubt that it had no
// effect.
func (l *Locker) definite(err error) bool {
	var ns *notSentError
	if errors.As(err, &ns) || errors.Is(err, distlock.ErrInvalid) {
		return true
	}
	c, ok := l.d.(Classifier)
	return ok && c.Definite(err)
}

// opError is the error of op on key.
func (l *Locker) opError(op, key string, err error) error {
	return &distlock.OpError{Backend: l.c.Backend, Op: op, Key: key, Err: err}
}

// notSentError wraps an error that ended a request before it was sent.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// NotSent wraps err, an error that ended a request before it was sent (no
// connection, a caller that left while its request was queued), so that the Locker
// knows the request had no effect and an Acquire that returned it needs no Abandon.
func NotSent(err error) error { return &notSentError{err} }

// IsNotSent reports whether err says that its request was never sent.
func IsNotSent(err error) bool {
	var ns *notSentError
	return errors.As(err, &ns)
}
