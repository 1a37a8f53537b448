package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/redisx"
)

// Renew extends lease to ttl from now on every node where its token still owns the
// key (an atomic GET-compare-PEXPIRE script), and returns the new Lease when a quorum
// of nodes extended it; its Expires is the time taken before the request was sent,
// plus ttl, minus the drift allowance. Fence, Key and Token stay the same. Renew
// never shortens a node's lock: a node whose lock has more than ttl left keeps it, so
// every node that holds the lease holds it until at least max(its old expiry, now +
// ttl), and a Renew that fails with an unknown outcome leaves the old Expires valid.
//
// It returns an error wrapping distlock.ErrNotHeld, without asking the nodes, when
// the lease's Expires has passed, and when so many nodes answered that
// the token no longer owns the key that a quorum is out of reach; it then removes the
// token's remaining locks in the background. Any other error (too few nodes
// answered, the round took longer than the validity) leaves the lease's state unknown;
// the old Expires still bounds it. Renew never re-takes a node whose lock is gone: a
// lease that lapsed stays dead. Every error is an *distlock.OpError.
//
// Concurrent Renews of one Locker (distlock.Hold with many leases) go out in
// batches, one call per node per batch (see renewbatch.go): a Renew that comes
// while a batch is in flight waits for it, then goes in the next one, whose nodes
// each get NodeTimeout(ttl) from when it is sent. If ctx ends while the Renew waits,
// it returns at once and is not sent.
func (l *Locker) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	start := time.Now() // before anything else: Expires counts from here
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
	if err := checkLease(lease); err != nil {
		return distlock.Lease{}, err
	}
	if err := l.checkTTL(ttl); err != nil {
		return distlock.Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return distlock.Lease{}, fmt.Errorf("fence %d: %w", lease.Fence, err)
	}
	if !start.Before(lease.Expires) {
		// The holder was told the lease ends at Expires; the masters may keep the
		// key a little longer (the drift allowance), but it must not come back.
		return distlock.Lease{}, fmt.Errorf("fence %d: the lease's Expires passed %v before the Renew: %w",
			lease.Fence, start.Sub(lease.Expires).Round(time.Millisecond), distlock.ErrNotHeld)
	}
	n := l.names(lease.Key)
	ms := redisx.Millis(ttl)
	expires := start.Add(ttl - l.drift(ttl))
	var res []reply[bool]
	if redisx.Ours(lease.Token) {
		// Concurrent Renews of this Locker go out in batches (renewbatch.go).
		res = l.renewOn(ctx, &renewal{lock: n.Lock, token: lease.Token, ms: ms, nt: l.NodeTimeout(ttl)})
	} else {
		// A token with '|' is none of ours: it owns nothing, on any node.
		res = make([]reply[bool], len(l.nodes))
		for i := range res {
			res[i] = reply[bool]{ran: true, answered: true}
		}
	}
	var extended []int
	notHeld := 0
	for i, r := range res {
		switch {
		case r.err != nil:
		case r.v:
			extended = append(extended, i)
		default:
			notHeld++
		}
	}
	if len(extended) >= l.quorum {
		if now := time.Now(); !expires.After(now) {
			return distlock.Lease{}, fmt.Errorf("fence %d: the quorum took %v, more than ttl %v less the drift allowance %v",
				lease.Fence, now.Sub(start), ttl, l.drift(ttl))
		}
		lease.Expires = expires
		return lease, nil
	}
	if notHeld > len(l.nodes)-l.quorum {
		l.release(ctx, extended, newReleaseCall(n, lease.Token), 0)
		return distlock.Lease{}, fmt.Errorf("fence %d: held on %d of %d nodes, not on %d (quorum %d): %w",
			lease.Fence, len(extended), len(l.nodes), notHeld, l.quorum, distlock.ErrNotHeld)
	}
	errs := nodeErrors(l, res)
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return distlock.Lease{}, fmt.Errorf("fence %d: extended on %d of %d nodes, not held on %d, %d failed (quorum %d): %w",
		lease.Fence, len(extended), len(l.nodes), notHeld, len(l.nodes)-len(extended)-notHeld, l.quorum, errors.Join(errs...))
}

// decidedBool reports whether the answers so far of an owner-checked operation on
// every node (true: done on that node, false: not held there) decide its result: a
// quorum said true, or so many said false (not held) or so many failed that a quorum
// is out of reach.
func (l *Locker) decidedBool(res []reply[bool]) bool {
	yes, no, failed := 0, 0, 0
	for _, r := range res {
		switch {
		case r.err != nil:
			failed++
		case !r.answered:
		case r.v:
			yes++
		default:
			no++
		}
	}
	q := l.quorum
	return yes >= q || no > len(l.nodes)-q || failed > len(l.nodes)-q
}
