package redislock

import (
	"context"
	"fmt"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/redisx"
)

// Unlock releases lease if its token still owns the key (an atomic GET-compare-DEL
// script) and publishes the release on the key's channel, which wakes Wait. It
// returns an error wrapping distlock.ErrNotHeld, and changes nothing, when the lease
// no longer held the key. If ctx ends first, Unlock returns ctx's error and the
// request completes in the background.
//
// If the connection breaks after the script ran and go-redis resends it, the resent
// script finds the key gone and Unlock reports ErrNotHeld although this lease was
// released by it: either way the lease is over.
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
	if err := checkLease(lease, nil); err != nil {
		return err
	}
	n := l.names(lease.Key)
	var ok bool
	var err error
	if redisx.Ours(lease.Token) {
		// Concurrent Unlocks (and TryLocks, Renews) share round trips.
		ok, err = l.node.ReleaseShared(ctx, n, lease.Token)
	}
	if err != nil {
		return fmt.Errorf("fence %d: %w", lease.Fence, err)
	}
	if !ok {
		return fmt.Errorf("fence %d: %w", lease.Fence, distlock.ErrNotHeld)
	}
	return nil
}
