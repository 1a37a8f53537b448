package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/redisx"
)

// Renew extends lease to ttl from now, if its token still owns the key (an atomic
// GET-compare-PEXPIRE script), and returns the new Lease, whose Expires is the time
// taken before the request was sent plus ttl. It never shortens the lock on the
// server: when the lock has more than ttl left, the script leaves it as it is, so
// the server holds the key until at least max(the old expiry, now + ttl). It returns
// an error wrapping distlock.ErrNotHeld when the lease expired (at once, without a
// request, once its Expires has passed), was released or
// another lease holds the key. Any other error (a transport error, ctx done, a reply
// that came after ttl) leaves the lease's state unknown; the old Expires bounds it.
func (l *Locker) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	start := time.Now()
	if err := l.group.Enter(); err != nil {
		return distlock.Lease{}, opError("Renew", lease.Key, err)
	}
	defer l.group.Leave()
	next, err := l.renew(ctx, lease, ttl, start)
	if err != nil {
		return distlock.Lease{}, opError("Renew", lease.Key, err)
	}
	return next, nil
}

func (l *Locker) renew(ctx context.Context, lease distlock.Lease, ttl time.Duration, start time.Time) (distlock.Lease, error) {
	if err := checkLease(lease, &ttl); err != nil {
		return distlock.Lease{}, err
	}
	if !start.Before(lease.Expires) {
		// The holder was told the lease ends at Expires; the key may live on
		// the server a little longer (the request's latency), but the lease
		// must not come back.
		return distlock.Lease{}, fmt.Errorf("fence %d: the lease's Expires passed %v before the Renew: %w",
			lease.Fence, start.Sub(lease.Expires).Round(time.Millisecond), distlock.ErrNotHeld)
	}
	n := l.names(lease.Key)
	ms := redisx.Millis(ttl)
	var renewed bool
	var err error
	if redisx.Ours(lease.Token) {
		// Concurrent Renews (and TryLocks, Unlocks) share round trips.
		renewed, err = l.node.RenewShared(ctx, n.Lock, lease.Token, ms)
	}
	if err != nil {
		return distlock.Lease{}, fmt.Errorf("fence %d: %w", lease.Fence, err)
	}
	if !renewed {
		return distlock.Lease{}, fmt.Errorf("fence %d: %w", lease.Fence, distlock.ErrNotHeld)
	}
	expires := start.Add(ttl)
	if now := time.Now(); !expires.After(now) {
		return distlock.Lease{}, fmt.Errorf("fence %d: the reply came %v after the request, later than ttl %v; the old Expires still bounds the lease",
			lease.Fence, now.Sub(start), ttl)
	}
	lease.Expires = expires
	return lease, nil
}
