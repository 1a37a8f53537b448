package sqllock

import (
	"context"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock/internal/calls"
)

// Unlock releases the lease if it still owns its key: it sets the row's expiry to
// the database's now, keeping the row and its fence. It returns an error wrapping
// distlock.ErrNotHeld, and changes nothing, when the lease was no longer held.
func (l *Locker) Unlock(ctx context.Context, lease distlock.Lease) error {
	cctx, end, err := l.calls.Begin(ctx)
	if err != nil {
		return l.opError("Unlock", lease.Key, err)
	}
	defer end()
	if err := l.unlock(cctx, lease); err != nil {
		return l.opError("Unlock", lease.Key, calls.Err(cctx, err))
	}
	if w := l.waits.Load(); w != nil {
		w.free(lease.Key) // wake a Wait of the key now, not at the next read
	}
	return nil
}

func (l *Locker) unlock(ctx context.Context, lease distlock.Lease) error {
	if err := validLease(lease); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r := row(lease.Key, lease.Token)
	var held bool
	err := l.retry(ctx, func() error {
		var err error
		held, err = l.d.Release(ctx, r)
		return err
	})
	if err != nil {
		return err
	}
	if !held {
		return distlock.ErrNotHeld
	}
	return nil
}
