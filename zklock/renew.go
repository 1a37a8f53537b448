package zklock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
)

// Renew checks, through the leader, that the lease's lock node still exists and
// belongs to this Locker's current session, and returns the lease with Expires =
// start + min(ttl, 2/3 S - TickTime/2), S the granted session timeout and start taken
// before the check (see "How long a lease is held" in the package doc). The check is a
// write that a quorum commits and that changes nothing: ZooKeeper keeps the lock for
// as long as the session lives, so there is nothing to extend (or shorten), and a
// Renew whose outcome is unknown leaves the server as it was. It returns an error
// wrapping distlock.ErrNotHeld when the node is gone, belongs to another session (the
// one that created it ended, or the lease is another client's), or the lease was
// reported lost (see Lost). Concurrent Renews of one Locker share multis of checks
// (see "Round trips" in the package doc). Errors are *distlock.OpError.
func (l *Locker) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	_, node, err := l.leaseNode("Renew", lease)
	if err != nil {
		return distlock.Lease{}, err
	}
	fail := func(err error) (distlock.Lease, error) {
		return distlock.Lease{}, opError("Renew", lease.Key, err)
	}
	if err := distlock.ValidateTTL(ttl); err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if l.isClosed() {
		return fail(distlock.ErrClosed)
	}
	if err := l.checkDead(lease.Token); err != nil {
		return fail(err)
	}
	start := time.Now()
	owner, czxid, err := l.confirmLease(ctx, lease, node)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		l.notHeld(lease.Token)
		return fail(fmt.Errorf("lock node is gone: %w", distlock.ErrNotHeld))
	case errors.Is(err, zk.ErrSessionExpired):
		l.notHeld(lease.Token)
		return fail(fmt.Errorf("the ZooKeeper session expired: %w", distlock.ErrNotHeld))
	case err != nil:
		return fail(err)
	case czxid != lease.Fence:
		return fail(fmt.Errorf("the lock node was not created by this lease's acquisition: %w", distlock.ErrNotHeld))
	}
	// Read the session after the reply: a session that expired meanwhile has already
	// been replaced on the connection.
	if sid := l.conn.SessionID(); owner != sid {
		l.notHeld(lease.Token)
		return fail(fmt.Errorf("the lock node belongs to ZooKeeper session %#x, not to this client's session %#x (it ended, or the lease is another client's): %w", owner, sid, distlock.ErrNotHeld))
	}
	if err := l.checkDead(lease.Token); err != nil {
		return fail(err)
	}
	valid, least := l.validity(ttl)
	next := lease
	next.Expires = start.Add(valid)
	if !next.Expires.After(time.Now()) {
		return fail(fmt.Errorf("the answers came %v after the request, after the validity %v ran out; the lease is as it was", time.Since(start).Round(time.Millisecond), valid))
	}
	l.renewed(lease.Token, next.Expires, least)
	return next, nil
}

// confirmLease proves, through the leader, that lease's node (node) exists, and
// returns its owner session and czxid. For a lease that this Locker's TryLock
// returned, both are known: the node's path names the acquisition (its 128-bit
// random id), so a node at that path is the one that acquisition created, and the
// check joins the next multi of checks (see checks.go). For another lease, a check
// of its own reads the node's stat in the same round trip (confirm).
func (l *Locker) confirmLease(ctx context.Context, lease distlock.Lease, node string) (owner int64, czxid uint64, err error) {
	l.mu.Lock()
	h := l.held[lease.Token]
	l.mu.Unlock()
	if h != nil && h.key == lease.Key && h.fence == lease.Fence {
		if err := l.check(ctx, node); err != nil {
			return 0, 0, err
		}
		return h.session, h.fence, nil
	}
	stat, err := call(ctx, func() (*zk.Stat, error) { return l.confirm(node) })
	if err != nil {
		return 0, 0, err
	}
	return stat.EphemeralOwner, uint64(stat.Czxid), nil
}
