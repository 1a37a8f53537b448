package sqllock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/sqllock/internal/calls"
)

// Renew moves the lease's expiry to ttl from now (by the database's clock) if the
// lease still owns its key, and returns the new Lease (same Token and Fence) with
// Expires = the time before the statement was sent + ttl. It never shortens what the
// database holds: the row keeps the later of its expiry and now + ttl, so that after
// a Renew whose outcome is unknown (a lost reply) the old Lease's Expires is still a
// bound. A reply that comes after ttl is an error (the old Lease still stands), not
// a Lease that has already expired. It returns an error wrapping
// distlock.ErrNotHeld when the lease expired (at once, without a statement, once its
// Expires has passed), was released or another lease holds the key.
func (l *Locker) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	start := time.Now()
	cctx, end, err := l.calls.Begin(ctx)
	if err != nil {
		return distlock.Lease{}, l.opError("Renew", lease.Key, err)
	}
	defer end()
	next, err := l.renew(cctx, lease, ttl, start)
	if err != nil {
		return distlock.Lease{}, l.opError("Renew", lease.Key, calls.Err(cctx, err))
	}
	return next, nil
}

func (l *Locker) renew(ctx context.Context, lease distlock.Lease, ttl time.Duration, start time.Time) (distlock.Lease, error) {
	if err := validLease(lease); err != nil {
		return distlock.Lease{}, err
	}
	if err := driver.ValidateTTL(ttl); err != nil {
		return distlock.Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return distlock.Lease{}, err
	}
	if !start.Before(lease.Expires) {
		// The holder was told the lease ends at Expires; the row may still be
		// there (the database's clock, a Renew in flight), but the lease must not
		// come back.
		return distlock.Lease{}, fmt.Errorf("the lease's Expires passed %v before the Renew: %w",
			start.Sub(lease.Expires).Round(time.Millisecond), distlock.ErrNotHeld)
	}
	r := row(lease.Key, lease.Token)
	var held bool
	err := l.retry(ctx, func() error {
		var err error
		if l.renewer != nil {
			held, err = l.renewer.renew(ctx, r, ttl)
		} else {
			held, err = l.d.Renew(ctx, r, ttl)
		}
		return err
	})
	if err != nil {
		return distlock.Lease{}, err
	}
	if !held {
		return distlock.Lease{}, distlock.ErrNotHeld
	}
	expires := start.Add(ttl)
	if now := time.Now(); !expires.After(now) {
		// The database kept the row at least until the old Expires (a renewal
		// never shortens), so the old Lease still bounds the hold.
		return distlock.Lease{}, fmt.Errorf("the reply came %v after the request, later than ttl %v: the renewed lease had already expired (the old Lease's Expires still stands)",
			now.Sub(start), ttl)
	}
	lease.Expires = expires
	return lease, nil
}

// validLease returns an error wrapping distlock.ErrInvalid when lease cannot have
// come from TryLock.
func validLease(lease distlock.Lease) error {
	if lease.IsZero() {
		return fmt.Errorf("%w: zero Lease", distlock.ErrInvalid)
	}
	if err := driver.ValidateKey(lease.Key, MaxKeyLen); err != nil {
		return err
	}
	if lease.Token == "" {
		return fmt.Errorf("%w: Lease with an empty Token", distlock.ErrInvalid)
	}
	return nil
}
