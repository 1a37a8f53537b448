package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock"
)

// Renew extends lease to ttl from now on every node where its token still owns the
// key (an atomic GET-compare-PEXPIRE script), and returns the new Lease when a quorum
// of nodes extended it; its Expires is the time taken before the request was sent,
// plus ttl, minus the drift allowance. Fence, Key and Token stay the same. Renew
// never shortens a node's lock: a node whose lock has more than ttl left keeps it, so
// every node that holds the lease holds it until at least max(its old expiry, now +
// ttl), and a Renew that fails with an unknown outcome leaves the old Expires valid.
//
// It returns an error wrapping distlock.ErrNotHeld when so many nodes answered that
// the token no longer owns the key that a quorum is out of reach; it then removes the
// token's remaining locks in the background. Any other error (too few nodes
// answered, the round took longer than the validity) leaves the lease's state unknown;
// the old Expires still bounds it. Renew never re-takes a node whose lock is gone: a
// lease that lapsed stays dead.
func (l *Locker) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	start := time.Now() // before anything else: Expires counts from here
	if err := l.checkLease(lease); err != nil {
		return distlock.Lease{}, err
	}
	if err := l.checkTTL(ttl); err != nil {
		return distlock.Lease{}, err
	}
	what := func() string {
		return fmt.Sprintf("redlock: Renew of key %s (fence %d)", showKey(lease.Key), lease.Fence)
	}
	if err := ctx.Err(); err != nil {
		return distlock.Lease{}, fmt.Errorf("%s: %w", what(), err)
	}
	n := l.names(lease.Key)
	ms := millis(ttl)
	expires := start.Add(ttl - l.Drift(ttl))
	res := fanout(ctx, l, nil, l.NodeTimeout(ttl), func(ctx context.Context, i int) (bool, error) {
		v, err := l.run(ctx, i, renewScript, []string{n.lock}, lease.Token, ms).Int64()
		return v == 1, err
	}, nil, l.decidedBool, true)
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
			return distlock.Lease{}, fmt.Errorf("%s: the quorum took %v, more than ttl %v less the drift allowance %v", what(), now.Sub(start), ttl, l.Drift(ttl))
		}
		lease.Expires = expires
		return lease, nil
	}
	if notHeld > len(l.nodes)-l.quorum {
		l.release(ctx, extended, n, lease.Token, ttl, 0)
		return distlock.Lease{}, fmt.Errorf("%s: held on %d of %d nodes, not on %d (quorum %d): %w",
			what(), len(extended), len(l.nodes), notHeld, l.quorum, distlock.ErrNotHeld)
	}
	errs := nodeErrors(l, res)
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return distlock.Lease{}, fmt.Errorf("%s: extended on %d of %d nodes, not held on %d, %d failed (quorum %d): %w",
		what(), len(extended), len(l.nodes), notHeld, len(l.nodes)-len(extended)-notHeld, l.quorum, errors.Join(errs...))
}

// Unlock releases lease on every node where its token still owns the key (an atomic
// GET-compare-DEL script that publishes the release on the key's channel, which wakes
// Wait). It returns nil when a quorum of nodes released it, and an error wrapping
// distlock.ErrNotHeld when so many nodes answered that it was not held that fewer
// than a quorum can have held it (it may then have removed the token's leftover locks
// on a minority of nodes, which held no lease). Any other error (too few nodes
// answered in time) leaves some locks to expire by their ttl.
//
// Each node gets Options.NodeTimeout. If ctx ends first, Unlock returns ctx's error
// and the requests complete in the background.
func (l *Locker) Unlock(ctx context.Context, lease distlock.Lease) error {
	if err := l.checkLease(lease); err != nil {
		return err
	}
	what := func() string {
		return fmt.Sprintf("redlock: Unlock of key %s (fence %d)", showKey(lease.Key), lease.Fence)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what(), err)
	}
	if a, ok := l.late.Load(lease.Token); ok {
		// A node that grants this lease's lock from now on releases it at once.
		a.(*attempt).unlocked.Store(true)
	}
	n := l.names(lease.Key)
	res := fanout(ctx, l, nil, l.opts.NodeTimeout, func(ctx context.Context, i int) (bool, error) {
		return l.releaseOn(ctx, i, n, lease.Token)
	}, nil, l.decidedBool, true)
	released, notHeld := 0, 0
	for _, r := range res {
		switch {
		case r.err != nil:
		case r.v:
			released++
		default:
			notHeld++
		}
	}
	if released >= l.quorum {
		return nil
	}
	if notHeld > len(l.nodes)-l.quorum {
		return fmt.Errorf("%s: held on %d of %d nodes (quorum %d): %w", what(), released, len(l.nodes), l.quorum, distlock.ErrNotHeld)
	}
	errs := nodeErrors(l, res)
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return fmt.Errorf("%s: released on %d of %d nodes, not held on %d, %d failed (quorum %d): %w",
		what(), released, len(l.nodes), notHeld, len(l.nodes)-released-notHeld, l.quorum, errors.Join(errs...))
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
