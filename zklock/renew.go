package zklock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
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
// reported lost (see Lost) — also when that happens while the check is in flight:
// the lease reported lost, found not held, or unlocked meanwhile, or, for a lease
// watched through Lost, its Expires passed before the answer came. Renew settles its
// answer in one step with the Locker's loss monitor, so it never returns an Expires
// for a lease whose node the Locker deletes by the old one. Concurrent Renews of one
// Locker share multis of checks (see "Round trips" in the package doc). Errors are
// *distlock.OpError.
func (l *Locker) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	_, node, err := l.leaseNode("Renew", lease)
	if err != nil {
		return distlock.Lease{}, err
	}
	fail := func(err error) (distlock.Lease, error) {
		return distlock.Lease{}, opError("Renew", lease.Key, err)
	}
	if err := driver.ValidateTTL(ttl); err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if now := time.Now(); !now.Before(lease.Expires) {
		// The holder was told the lease ends at Expires; the node may still be
		// there (a lease nobody watches keeps it while the session lives), but the
		// lease must not come back.
		return fail(fmt.Errorf("the lease's Expires passed %v before the Renew: %w", now.Sub(lease.Expires).Round(time.Millisecond), distlock.ErrNotHeld))
	}
	f, err := l.beginRenew(lease.Token)
	if err != nil {
		return fail(err)
	}
	start := time.Now()
	owner, czxid, err := l.confirmLease(ctx, lease, node)
	if err == nil {
		err = l.ownedBy(lease, owner, czxid)
	}
	if err != nil {
		l.endRenew(lease.Token, f)
		return fail(l.renewError(lease.Token, err))
	}
	if l.renewHook != nil {
		l.renewHook(lease)
	}
	expires, err := l.commitRenew(lease.Token, f, ttl, start)
	if err != nil {
		return fail(err)
	}
	next := lease
	next.Expires = expires
	return next, nil
}

// ownedBy returns nil when the lease's node, whose owner session and czxid a
// confirmation (started at start) just read, is the lease's and this client's, or
// why not: an error wrapping ErrNotHeld, after which the Locker forgets the lease.
// The session is read after the reply: one that expired meanwhile has been
// replaced on the connection by then.
func (l *Locker) ownedBy(lease distlock.Lease, owner int64, czxid uint64) error {
	if czxid != lease.Fence {
		return fmt.Errorf("the lock node was not created by this lease's acquisition: %w", distlock.ErrNotHeld)
	}
	if sid := l.conn.SessionID(); owner != sid {
		l.notHeld(lease.Token)
		return fmt.Errorf("the lock node belongs to ZooKeeper session %#x, not to this client's session %#x (it ended, or the lease is another client's): %w", owner, sid, distlock.ErrNotHeld)
	}
	return nil
}

// renewError maps the error of a lease's confirmation to Renew's, and forgets a
// lease that it shows not held.
func (l *Locker) renewError(token string, err error) error {
	switch {
	case errors.Is(err, zk.ErrNoNode):
		l.notHeld(token)
		return fmt.Errorf("lock node is gone: %w", distlock.ErrNotHeld)
	case errors.Is(err, zk.ErrSessionExpired):
		l.notHeld(token)
		return fmt.Errorf("the ZooKeeper session expired: %w", distlock.ErrNotHeld)
	}
	return err
}

// commitRenew settles the answer of a Renew of the lease with token, in flight f,
// whose confirmation was sent at start and succeeded: in one step under l.mu, so
// that no loss of the lease comes between the answer and the Locker's record of
// it. It returns the new Expires, start + the validity, and records it; or an error
// wrapping ErrNotHeld when the Locker let the lease go while the Renew was in
// flight, or the lease's Expires passed while it is watched (the loss monitor then
// declares it lost, and deletes its node, whatever a later Renew says); or
// ErrClosed.
func (l *Locker) commitRenew(token string, f *renewFlight, ttl time.Duration, start time.Time) (time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endRenewLocked(token, f)
	if l.closed {
		return time.Time{}, distlock.ErrClosed
	}
	if f.gone {
		return time.Time{}, fmt.Errorf("the lease was lost or released while its Renew was in flight: %w", distlock.ErrNotHeld)
	}
	now := time.Now()
	s := l.subs[token]
	if s != nil && !now.Before(s.expires) {
		l.loseLocked(token, s)
		return time.Time{}, fmt.Errorf("the lease's Expires passed before the server's answer came (%v after the request): the lease is reported lost: %w", now.Sub(start).Round(time.Millisecond), distlock.ErrNotHeld)
	}
	valid, least := l.validity(ttl)
	expires := start.Add(valid)
	if !expires.After(now) {
		return time.Time{}, fmt.Errorf("the answers came %v after the request, after the validity %v ran out; the lease is as it was", now.Sub(start).Round(time.Millisecond), valid)
	}
	if h := l.held[token]; h != nil {
		h.least = least
		if expires.After(h.expires) {
			h.expires = expires
		}
	}
	if s != nil && expires.After(s.expires) {
		s.expires = expires
		s.least = least
	}
	return expires, nil
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
