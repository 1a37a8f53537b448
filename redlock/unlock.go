package redlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/redisx"
)

// Unlock releases lease on every node where its token still owns the key (an atomic
// GET-compare-DEL script that publishes the release on the key's channel, which wakes
// Wait). It returns nil when a quorum of nodes released it, and an error wrapping
// distlock.ErrNotHeld when so many nodes answered that it was not held that fewer
// than a quorum can have held it (it may then have removed the token's leftover locks
// on a minority of nodes, which held no lease). Any other error (too few nodes
// answered in time) leaves some locks to expire by their ttl.
//
// Each node gets Options.NodeTimeout. Unlock returns as soon as the answers decide
// it; the requests to the other nodes complete in the background, as they do when
// ctx ends first (Unlock then returns ctx's error), on a context that ctx's end
// does not cancel, bounded by Options.CleanupTimeout. Every error is an
// *distlock.OpError.
func (l *Locker) Unlock(ctx context.Context, lease distlock.Lease) error {
	if err := l.group.Enter(); err != nil {
		return opError("Unlock", lease.Key, err)
	}
	defer l.group.Leave()
	if err := l.unlock(ctx, lease); err != nil {
		return opError("Unlock", lease.Key, err)
	}
	return nil
}

func (l *Locker) unlock(ctx context.Context, lease distlock.Lease) error {
	if err := checkLease(lease); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fence %d: %w", lease.Fence, err)
	}
	if a, ok := l.late.Load(lease.Token); ok {
		// A node that grants this lease's lock from now on releases it at once.
		a.(*attempt).unlocked.Store(true)
	}
	n := l.names(lease.Key)
	ours := redisx.Ours(lease.Token)
	leave := l.idArg
	if l.queue.Len(lease.Key) > 0 {
		leave = "" // waiters: keep the Locker's turn
	}
	c := newUnlockCall(n, lease.Key, lease.Token, leave)
	if !l.uses(useTurns) {
		c = newReleaseCall(n, lease.Token)
	}
	// Each release runs on a context of its own, not on the fan-out's, which ends
	// with ctx: a release that Unlock does not wait for (the others decided, or ctx
	// ended) still runs to its end, bounded by CleanupTimeout, so a caller that
	// cancels ctx right after Unlock leaves no node locked until the ttl.
	bg := context.WithoutCancel(ctx)
	res := fanout(ctx, l, nil, l.opts.NodeTimeout, func(_ context.Context, i int) (bool, error) {
		if !ours { // a token with '|' is none of ours: it owns nothing
			return false, nil
		}
		cctx, cancel := context.WithTimeout(bg, l.opts.CleanupTimeout)
		defer cancel()
		return l.releaseOn(cctx, i, c)
	}, nil, l.decidedBool, false) // the other nodes' releases finish in the background
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
		return fmt.Errorf("fence %d: held on %d of %d nodes (quorum %d): %w", lease.Fence, released, len(l.nodes), l.quorum, distlock.ErrNotHeld)
	}
	errs := nodeErrors(l, res)
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return fmt.Errorf("fence %d: released on %d of %d nodes, not held on %d, %d failed (quorum %d): %w",
		lease.Fence, released, len(l.nodes), notHeld, len(l.nodes)-released-notHeld, l.quorum, errors.Join(errs...))
}
