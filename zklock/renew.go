package zklock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
)

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
// it. It records start + the validity as the lease's Expires (the core returns one
// no later: its start came first); or returns an error wrapping ErrNotHeld when the
// Locker let the lease go while the Renew was in flight, or the lease's Expires
// passed while it is watched (the loss monitor then declares it lost, and deletes
// its node, whatever a later Renew says).
func (l *Locker) commitRenew(token string, f *renewFlight, ttl time.Duration, start time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endRenewLocked(token, f)
	if f.gone {
		return fmt.Errorf("the lease was lost or released while its Renew was in flight: %w", distlock.ErrNotHeld)
	}
	now := time.Now()
	s := l.subs[token]
	if s != nil && !now.Before(s.expires) {
		l.loseLocked(token, s)
		return fmt.Errorf("the lease's Expires passed before the server's answer came (%v after the request): the lease is reported lost: %w", now.Sub(start).Round(time.Millisecond), distlock.ErrNotHeld)
	}
	valid, least := l.validity(ttl)
	expires := start.Add(valid)
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
	return nil
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
		answer, err := l.checks.Do(ctx, node)
		if err == nil {
			err = answer
		}
		if err != nil {
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
