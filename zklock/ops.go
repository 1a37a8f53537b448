package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// ops is the driver.Driver of a Locker: one attempt of each operation on the
// ZooKeeper ensemble, which the core (driver.Locker) calls. The core's token is
// the protected id of the lock nodes that an Acquire creates; the Lease's Token that
// Locker.TryLock returns adds the node's sequence number (see claimGrant).
type ops Locker

var (
	_ driver.Driver     = (*ops)(nil)
	_ driver.Classifier = (*ops)(nil)
	_ driver.Inspector  = (*ops)(nil)
	_ driver.Closer     = (*ops)(nil)
)

// Acquire runs one attempt (see attempt) in a goroutine of the Locker, and returns
// its lock node's czxid when it won. When ctx ends first it returns ctx's error at
// once: the attempt finishes in the background, and deletes what it made, also
// a lock it wins. A won lock waits in l.grants for TryLock (claimGrant) or Abandon.
func (o *ops) Acquire(ctx context.Context, key, id string, ttl time.Duration) (uint64, error) {
	l := (*Locker)(o)
	const (
		pending int32 = iota
		delivered
		abandoned
	)
	var state atomic.Int32
	res := make(chan outcome, 1)
	a := &attempt{l: l, key: key, keyPath: l.keyPath(key), id: id, start: time.Now(), ttl: ttl, abandon: ctx.Done()}
	l.bg(func() {
		out, cleanup := a.run()
		if out.err == nil {
			l.grant(id, out.grant)
		}
		if state.CompareAndSwap(pending, delivered) {
			res <- out
		} else if out.err == nil {
			// The caller gave up before the lock was won: release it.
			l.ungrant(id)
		}
		if cleanup != nil {
			cleanup()
		}
	})
	select {
	case out := <-res:
		return out.fence(), out.err
	case <-ctx.Done():
		if state.CompareAndSwap(pending, abandoned) {
			return 0, fmt.Errorf("%w (the attempt finishes, and cleans up, in the background)", ctx.Err())
		}
	}
	out := <-res
	return out.fence(), out.err
}

// grant records the lease that an Acquire of id won, for TryLock to claim.
func (l *Locker) grant(id string, g grant) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held[g.token] = g.h
	l.grants[id] = g
}

// ungrant forgets the lease that an Acquire of id won and nobody will hold (the
// caller gave up, or the core refused it), and deletes its node in the background.
func (l *Locker) ungrant(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g, ok := l.grants[id]
	if !ok {
		return
	}
	delete(l.grants, id)
	delete(l.held, g.token)
	node, session := l.nodeOf(g.h.key, g.token), g.h.session
	l.bg(func() { l.reapNode(node, session) })
}

// Abandon releases the lock of an Acquire of id that the core refused (its reply
// came after the validity ran out). An attempt whose caller gave up, or that failed
// with an unknown outcome, cleans up after itself (Acquire, attempt.run): by
// deleting its nodes, found by id, until they are gone or the session has ended,
// which no clean-up timeout may cut short (an ephemeral node of a live session
// never expires). So Abandon only starts that work and returns nil.
func (o *ops) Abandon(_ context.Context, _, id string, _ time.Duration, _ error) error {
	(*Locker)(o).ungrant(id)
	return nil
}

// Renew proves that the lease's node exists and is this client's (see confirmLease),
// and records the new Expires with the loss monitor (commitRenew).
func (o *ops) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) error {
	l := (*Locker)(o)
	node, err := l.leaseNode(lease)
	if err != nil {
		return err
	}
	f, err := l.beginRenew(lease.Token)
	if err != nil {
		return err
	}
	start := time.Now()
	owner, czxid, err := l.confirmLease(ctx, lease, node)
	if err == nil {
		err = l.ownedBy(lease, owner, czxid)
	}
	if err != nil {
		l.endRenew(lease.Token, f)
		return asConnClosed(l.renewError(lease.Token, err))
	}
	if l.renewHook != nil {
		l.renewHook(lease)
	}
	return l.commitRenew(lease.Token, f, ttl, start)
}

// Release deletes the lease's node: its path is the Token's, unique to the
// acquisition and holding its 128 random bits, so this cannot delete another
// acquisition's node. An unknown outcome lets go of the lease (unlockUnknown).
func (o *ops) Release(ctx context.Context, lease distlock.Lease) error {
	l := (*Locker)(o)
	node, err := l.leaseNode(lease)
	if err != nil {
		return err
	}
	if err := l.checkDead(lease.Token); err != nil {
		return err
	}
	_, err = call(ctx, func() (struct{}, error) { return struct{}{}, l.conn.Delete(node, -1) })
	switch {
	case err == nil:
		l.notHeld(lease.Token)
		return nil
	case errors.Is(err, zk.ErrNoNode):
		l.notHeld(lease.Token)
		return fmt.Errorf("lock node is gone: %w", distlock.ErrNotHeld)
	case errors.Is(err, zk.ErrSessionExpired):
		l.notHeld(lease.Token)
		return fmt.Errorf("the ZooKeeper session expired: %w", distlock.ErrNotHeld)
	}
	l.unlockUnknown(lease.Token, node)
	return asConnClosed(err)
}

// Inspect reads the lowest lock node of key: its czxid, its data (the owner label)
// and, as the time left, this client's granted session timeout.
func (o *ops) Inspect(ctx context.Context, key string) (distlock.Holder, time.Duration, error) {
	l := (*Locker)(o)
	h, err := call(ctx, func() (distlock.Holder, error) { return l.inspect(l.keyPath(key)) })
	return h, l.sess.Timeout(), asConnClosed(err)
}

// inspect lists keyPath and reads its lowest lock node, again when that node went
// meanwhile.
func (l *Locker) inspect(keyPath string) (distlock.Holder, error) {
	for {
		children, _, err := l.conn.Children(keyPath)
		if errors.Is(err, zk.ErrNoNode) {
			return distlock.Holder{}, fmt.Errorf("no lock node: %w", distlock.ErrNotHeld)
		}
		if err != nil {
			return distlock.Holder{}, err
		}
		low, ok := lowest(children)
		if !ok {
			return distlock.Holder{}, fmt.Errorf("no lock node: %w", distlock.ErrNotHeld)
		}
		data, stat, err := l.conn.Get(keyPath + "/" + low.name)
		if errors.Is(err, zk.ErrNoNode) {
			continue // released meanwhile: look again
		}
		if err != nil {
			return distlock.Holder{}, err
		}
		return distlock.Holder{Fence: uint64(stat.Czxid), Owner: string(data)}, nil
	}
}

// Retryable: an Acquire that made no node (a retryError: its create was not sent,
// or its session had expired) may go again, with the same id. Any other error of an
// attempt that may have made a node starts the clean-up of its id, which a new
// attempt of that id would race; and a Renew, Release or Inspect whose connection
// broke is left to its caller.
func (o *ops) Retryable(err error) bool {
	var r *retryError
	return errors.As(err, &r)
}

// Definite: only a request that was never sent; after any other error of an
// Acquire the core calls Abandon, which releases nothing unless the Acquire won
// (see Abandon).
func (o *ops) Definite(err error) bool { return driver.IsNotSent(err) }

// Close runs after the core's calls have returned (see Locker.Close): it closes the
// Lost channels, deletes the waiter nodes of the Waits that returned, and deletes
// the node of each held lease once its Expires has passed.
func (o *ops) Close() error {
	l := (*Locker)(o)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	close(l.done)
	reaped := make(map[string]bool)
	for tok, s := range l.subs {
		s.fire()
		delete(l.subs, tok)
		node := l.nodeOf(s.key, tok)
		reaped[node] = true
		l.reapAfter(s.expires, node, l.owner(s), nil)
	}
	for tok, h := range l.held {
		delete(l.held, tok)
		if node := l.nodeOf(h.key, tok); !reaped[node] {
			l.reapAfter(h.expires, node, h.session, nil)
		}
	}
	for kp, ws := range l.pending {
		for _, w := range ws {
			w.timer.Stop()
			l.bg(func() { l.reapPending(w) })
		}
		delete(l.pending, kp)
	}
	return nil
}
