package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/redisx"
)

// Wait returns nil when key may be free: at once if fewer than a quorum of nodes hold
// a lock on it, else when a release is published on any node (Unlock, and the
// clean-up of a failed attempt, publish on the key's channel on every node they
// release) or when enough of the holders' locks have expired, by the nodes' remaining
// times to live, that the free nodes could form a quorum. A nil return is a hint,
// not a lease: call TryLock.
//
// It subscribes to the key's channel on every node first, and reads the locks once
// N-quorum+1 subscriptions are confirmed: any quorum that holds the key shares a
// node with them, so its release is not missed. Until then (a subscription that a
// dead connection never confirms, or one not confirmed within Options.NodeTimeout)
// a read of the locks sent at once bounds the wait by the holders' times to live. A
// node that does not answer the read counts as held for good; when fewer than a
// quorum of nodes answer, Wait returns an error that does not wrap ErrLocked
// (distlock.Lock then backs off).
//
// When ctx ends while the key is held, or is done when Wait is called, it returns
// errors.Join(distlock.ErrLocked, ctx.Err()); when ctx ends before Wait saw the key
// held, it returns ctx's error without ErrLocked. After Close it returns
// distlock.ErrClosed. Every error is an *distlock.OpError.
//
// The Waits of one Locker share one pub/sub connection per node, opened by the first
// Wait and closed a few seconds after the last one ends (or by Close, or when the
// client is closed); a Wait that follows another on the same key finds its channel
// still subscribed. Each connection is pinged after 5s of silence and replaced when
// the PING is not answered within 5s more; when one breaks or is replaced, the Waits
// in progress return nil, since a release may have been missed.
func (l *Locker) Wait(ctx context.Context, key string) error {
	if err := l.group.Enter(); err != nil {
		return opError("Wait", key, err)
	}
	defer l.group.Leave()
	if err := l.wait(ctx, key); err != nil {
		return opError("Wait", key, err)
	}
	return nil
}

func (l *Locker) wait(ctx context.Context, key string) error {
	if err := distlock.ValidateKey(key, MaxKeyLen); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return errors.Join(distlock.ErrLocked, err)
	}
	n := l.names(key)
	ls := redisx.NewListener(len(l.nodes))
	registered := 0
	defer func() {
		for _, node := range l.nodes[:registered] {
			node.Hub.Unregister(n.Channel, ls)
		}
	}()
	for _, node := range l.nodes {
		if err := node.Hub.Register(n.Channel, ls); err != nil {
			return err
		}
		registered++
	}
	w := &waiter{Waiting: redisx.NewWaiting(ctx), l: l, ctx: ctx, n: n}
	defer w.Stop()

	// Enough subscriptions, bounded by the node timeout and, once read, by the
	// holders' times to live.
	need := len(l.nodes) - l.quorum + 1
	ok := make([]bool, len(l.nodes))
	settled := make([]bool, len(l.nodes))
	nok, nsettled := 0, 0
	count := func(c redisx.Confirmation) {
		if !settled[c.Node] {
			settled[c.Node] = true
			nsettled++
		}
		if c.Err == nil && !ok[c.Node] {
			ok[c.Node] = true
			nok++
		}
	}
	for drained := false; !drained; {
		select {
		case c := <-ls.Confirmed(): // channels subscribed already
			count(c)
		default:
			drained = true
		}
	}
	var read <-chan redisx.Result[bound]
	if nok < need && nsettled < len(l.nodes) {
		read = w.readBound()
		t := time.NewTimer(l.opts.NodeTimeout)
		defer t.Stop()
	confirm:
		for nok < need && nsettled < len(l.nodes) {
			select {
			case c := <-ls.Confirmed():
				count(c)
			case r := <-read:
				read = nil
				if done, err := w.read(r); done {
					return err
				}
			case <-ls.Woke():
				return w.woke()
			case <-w.Bound:
				return nil
			case <-t.C:
				break confirm // give up on the rest; they may still confirm and wake us
			case <-ctx.Done():
				return w.GaveUp()
			}
		}
	}

	// Read the locks (again): a release from now on is not missed.
	read = w.readBound()
	for {
		select {
		case r := <-read:
			read = nil
			if done, err := w.read(r); done {
				if err != nil && w.Held() {
					continue // the bound read before stands
				}
				return err
			}
		case <-ls.Woke():
			return w.woke()
		case <-w.Bound:
			return nil
		case <-ctx.Done():
			return w.GaveUp()
		}
	}
}

// A waiter is one Wait's state and its key.
type waiter struct {
	*redisx.Waiting
	l   *Locker
	ctx context.Context
	n   redisx.Names
}

// A bound is what a read of every node's lock says: the key is free (a quorum of
// nodes could lock it now), or it is held until at most until.
type bound struct {
	until time.Time
	free  bool
}

// readBound reads every node's lock in the background.
func (w *waiter) readBound() <-chan redisx.Result[bound] {
	return redisx.Async(w.l.group, func() (bound, error) { return w.l.waitBound(w.ctx, w.n) })
}

// read acts on a readBound result: done with a nil error when the key is free, done
// with an error when the read failed; otherwise it moves the bound.
func (w *waiter) read(r redisx.Result[bound]) (done bool, err error) {
	if r.Err != nil {
		if w.ctx.Err() != nil {
			return true, w.GaveUp()
		}
		return true, r.Err
	}
	if r.V.free {
		return true, nil
	}
	w.HeldUntil(r.V.until)
	return false, nil
}

// woke is the result of a Wait that its listener woke: nil (a release, or one may
// have been missed), or ErrClosed when the Locker's Close woke it.
func (w *waiter) woke() error {
	if w.l.group.Closed() {
		return distlock.ErrClosed
	}
	return nil
}

// waitBound reads every node's lock and returns when the free nodes could form a
// quorum: free when they can now. Nodes that do not answer count as held for good;
// an error means that fewer than a quorum answered.
func (l *Locker) waitBound(ctx context.Context, n redisx.Names) (bound, error) {
	res := fanout(ctx, l, nil, l.opts.NodeTimeout, func(ctx context.Context, i int) (time.Duration, error) {
		return l.nodes[i].PTTL(ctx, n.Lock)
	}, nil, func(res []reply[time.Duration]) bool {
		free, failed := 0, 0
		for _, r := range res {
			switch {
			case r.err != nil:
				failed++
			case !r.answered:
			case r.v == -2:
				free++
			}
		}
		return free >= l.quorum || failed > len(l.nodes)-l.quorum
	}, false)
	free, answered := 0, 0
	var held []time.Time
	for _, r := range res {
		if r.err != nil {
			continue
		}
		answered++
		until, isFree := redisx.Bound(r.v)
		if isFree {
			free++
		} else {
			held = append(held, until)
		}
	}
	if answered < l.quorum {
		return bound{}, fmt.Errorf("only %d of %d nodes answered (quorum %d): %w", answered, len(l.nodes), l.quorum, errors.Join(nodeErrors(l, res)...))
	}
	if free >= l.quorum {
		return bound{free: true}, nil
	}
	// The quorum-free-th earliest expiry frees the last node a quorum needs.
	slices.SortFunc(held, time.Time.Compare)
	return bound{until: held[l.quorum-free-1]}, nil
}
