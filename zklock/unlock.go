package zklock

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
)

// Unlock deletes the lease's lock node. It returns an error wrapping
// distlock.ErrNotHeld when the node was already gone (released, or its session
// ended) or the lease was reported lost. When the delete's outcome is unknown (ctx
// ended, the connection broke), Unlock returns the error and keeps deleting the node
// in the background until it is gone or its session has ended; meanwhile the lease
// counts as lost (Lost closes; Renew and Unlock of it return ErrNotHeld). Errors
// are *distlock.OpError.
func (l *Locker) Unlock(ctx context.Context, lease distlock.Lease) error {
	_, node, err := l.leaseNode("Unlock", lease)
	if err != nil {
		return err
	}
	fail := func(err error) error { return opError("Unlock", lease.Key, err) }
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if l.isClosed() {
		return fail(distlock.ErrClosed)
	}
	if err := l.checkDead(lease.Token); err != nil {
		return fail(err)
	}
	// The node's path is the Token's: it is unique to the acquisition and holds its
	// 128 random bits, so this cannot delete another acquisition's node.
	_, err = call(ctx, func() (struct{}, error) { return struct{}{}, l.conn.Delete(node, -1) })
	switch {
	case err == nil:
		l.notHeld(lease.Token)
		return nil
	case errors.Is(err, zk.ErrNoNode):
		l.notHeld(lease.Token)
		return fail(fmt.Errorf("lock node is gone: %w", distlock.ErrNotHeld))
	case errors.Is(err, zk.ErrSessionExpired):
		l.notHeld(lease.Token)
		return fail(fmt.Errorf("the ZooKeeper session expired: %w", distlock.ErrNotHeld))
	default:
		l.unlockUnknown(lease.Token, node)
		return fail(err)
	}
}

// unlockUnknown lets go of a lease whose Unlock's outcome is unknown, and deletes
// its node in the background: Lost closes, and Renew and Unlock of the lease (also
// those in flight) say ErrNotHeld until the node is gone, as for a lease reported
// lost. The lease stays among the held ones until then, so that a Close that runs
// first deletes the node (the spawn then fails).
func (l *Locker) unlockUnknown(token, node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.subs[token]; s != nil {
		s.fire()
		delete(l.subs, token)
	}
	l.failRenewsLocked(token)
	l.dead[token] = struct{}{}
	if !l.spawnLocked(func() {
		l.reapNode(node, 0)
		l.mu.Lock()
		delete(l.dead, token)
		delete(l.held, token)
		l.mu.Unlock()
	}) {
		delete(l.dead, token)
	}
}
