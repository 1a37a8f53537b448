package zklock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
)

// leaseNode validates lease and returns its handle and node path. A Token that this
// package did not make names no lock: ErrNotHeld.
func (l *Locker) leaseNode(op string, lease distlock.Lease) (handle, string, error) {
	if err := distlock.ValidateLease(lease); err != nil {
		return handle{}, "", fmt.Errorf("zklock: %s: %w", op, err)
	}
	if err := distlock.ValidateKey(lease.Key, MaxKeyLen); err != nil {
		return handle{}, "", fmt.Errorf("zklock: %s: Lease: %w", op, err)
	}
	h, ok := parseToken(lease.Token)
	if !ok {
		return handle{}, "", fmt.Errorf("zklock: %s(%s): the Lease's Token is not one of a zklock lock node: %w", op, short(lease.Key), distlock.ErrNotHeld)
	}
	return h, h.nodePath(l.keyPath(lease.Key)), nil
}

// Renew checks, through the leader, that the lease's lock node still exists and
// belongs to this Locker's current session, and returns the lease with Expires =
// start + min(ttl, 2/3 SessionTimeout - TickTime/2), start taken before the check
// (see "How long a lease is held" in the package doc). The check is a write that a
// quorum commits and that changes nothing: ZooKeeper keeps the lock for as long as
// the session lives, so there is nothing to extend, and a Renew whose outcome is
// unknown leaves the server as it was. It returns an error wrapping
// distlock.ErrNotHeld when the node is gone, belongs to another session (the one that
// created it ended, or the lease is another client's), or the lease was reported lost
// (see Lost).
func (l *Locker) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	_, node, err := l.leaseNode("Renew", lease)
	if err != nil {
		return distlock.Lease{}, err
	}
	if err := distlock.ValidateTTL(ttl); err != nil {
		return distlock.Lease{}, fmt.Errorf("zklock: Renew(%s): %w", short(lease.Key), err)
	}
	fail := func(err error) (distlock.Lease, error) {
		return distlock.Lease{}, fmt.Errorf("zklock: Renew(%s): %w", short(lease.Key), err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if l.isClosed() {
		return fail(ErrClosed)
	}
	if err := l.checkDead(lease.Token); err != nil {
		return fail(err)
	}
	start := time.Now()
	stat, err := call(ctx, func() (*zk.Stat, error) { return l.confirm(node) })
	switch {
	case errors.Is(err, zk.ErrNoNode):
		l.dropSub(lease.Token)
		return fail(fmt.Errorf("lock node is gone: %w", distlock.ErrNotHeld))
	case errors.Is(err, zk.ErrSessionExpired):
		l.dropSub(lease.Token)
		return fail(fmt.Errorf("the ZooKeeper session expired: %w", distlock.ErrNotHeld))
	case err != nil:
		return fail(err)
	case uint64(stat.Czxid) != lease.Fence:
		return fail(fmt.Errorf("the lock node was not created by this lease's acquisition: %w", distlock.ErrNotHeld))
	}
	// Read the session after the reply: a session that expired meanwhile has already
	// been replaced on the connection.
	if sid := l.conn.SessionID(); stat.EphemeralOwner != sid {
		l.dropSub(lease.Token)
		return fail(fmt.Errorf("the lock node belongs to ZooKeeper session %#x, not to this client's session %#x (it ended, or the lease is another client's): %w", stat.EphemeralOwner, sid, distlock.ErrNotHeld))
	}
	if err := l.checkDead(lease.Token); err != nil {
		return fail(err)
	}
	next := lease
	next.Expires = start.Add(l.validity(ttl))
	if !next.Expires.After(time.Now()) {
		return fail(fmt.Errorf("the answers came %v after the request, after the validity %v ran out; the lease is as it was", time.Since(start).Round(time.Millisecond), l.validity(ttl)))
	}
	l.extendSub(lease.Token, next.Expires)
	return next, nil
}

// checkDead returns an error wrapping ErrNotHeld when the lease was reported lost.
func (l *Locker) checkDead(token string) error {
	l.mu.Lock()
	_, dead := l.dead[token]
	l.mu.Unlock()
	if dead {
		return fmt.Errorf("the lease was reported lost and its node is being removed: %w", distlock.ErrNotHeld)
	}
	return nil
}

// Unlock deletes the lease's lock node. It returns an error wrapping
// distlock.ErrNotHeld when the node was already gone (released, or its session
// ended) or the lease was reported lost. When the delete's outcome is unknown (ctx
// ended, the connection broke), Unlock returns the error and keeps deleting the node
// in the background until it is gone or its session has ended.
func (l *Locker) Unlock(ctx context.Context, lease distlock.Lease) error {
	_, node, err := l.leaseNode("Unlock", lease)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		return fmt.Errorf("zklock: Unlock(%s): %w", short(lease.Key), err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if l.isClosed() {
		return fail(ErrClosed)
	}
	if err := l.checkDead(lease.Token); err != nil {
		return fail(err)
	}
	// The node's path is the Token's: it is unique to the acquisition and holds its
	// 128 random bits, so this cannot delete another acquisition's node.
	_, err = call(ctx, func() (struct{}, error) { return struct{}{}, l.conn.Delete(node, -1) })
	switch {
	case err == nil:
		l.dropSub(lease.Token)
		return nil
	case errors.Is(err, zk.ErrNoNode):
		l.dropSub(lease.Token)
		return fail(fmt.Errorf("lock node is gone: %w", distlock.ErrNotHeld))
	case errors.Is(err, zk.ErrSessionExpired):
		l.dropSub(lease.Token)
		return fail(fmt.Errorf("the ZooKeeper session expired: %w", distlock.ErrNotHeld))
	default:
		l.spawn(func() { l.reapNode(node, 0) })
		return fail(err)
	}
}
