package election

import (
	"context"
	"fmt"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/keytext"
)

// A Leadership is one term of a candidate as leader, from Campaign until Resign or
// the loss of its lease, which is renewed in the background meanwhile. Its methods
// are safe for concurrent use.
type Leadership struct {
	key    string
	term   uint64
	held   *distlock.Held
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// Context returns a context that is cancelled when the leadership ends: with a
// cause wrapping distlock.ErrNotHeld when the lease is lost (test it with
// errors.Is(context.Cause(ctx), distlock.ErrNotHeld)), or ErrResigned at Resign.
// Do the leader's work under it.
func (l *Leadership) Context() context.Context { return l.ctx }

// Term returns the leadership's term: its lease's Fence, which strictly increases
// from one leadership of the election to the next. Hand it to the resources the
// leader writes to, so that they can reject a deposed leader's writes.
func (l *Leadership) Term() uint64 { return l.term }

// Lease returns the leader's lease as last renewed: its Expires bounds how long the
// leadership is certain.
func (l *Leadership) Lease() distlock.Lease { return l.held.Lease() }

// Err returns nil while the caller certainly leads: Context has not ended and the
// lease's Expires has not passed (on the monotonic clock). Otherwise it returns why
// not: ErrResigned, or an error wrapping distlock.ErrNotHeld. Check it just before
// an action that only the leader may take; pass Term along as well, since a pause
// between the check and the action can outlast the lease.
func (l *Leadership) Err() error {
	if l.ctx.Err() != nil {
		return context.Cause(l.ctx)
	}
	if l.held.Lease().Remaining() <= 0 {
		return fmt.Errorf("%w: election %s: the lease of term %d expired before a renewal succeeded",
			distlock.ErrNotHeld, keytext.Quote(l.key), l.term)
	}
	return nil
}

// Resign ends the leadership: it cancels Context (cause ErrResigned), stops the
// renewals, waits for one in flight, and releases the key with ctx, so that a
// waiting candidate leads at once. It returns the release's error, or, when the
// lease had been lost already, the loss (wrapping distlock.ErrNotHeld). Calling it
// again returns the first result. Give it a context that is still alive
// (context.WithoutCancel of a dead one, with a timeout): with a dead one the key
// is left to expire.
func (l *Leadership) Resign(ctx context.Context) error {
	l.cancel(ErrResigned)
	return l.held.Release(ctx)
}
