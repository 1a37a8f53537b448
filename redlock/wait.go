package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/distlock/distlock"
)

// noTTLBound bounds a Wait for a node's lock that has no time to live, which this
// package never makes (someone PERSISTed it, or wrote the key by hand).
const noTTLBound = time.Second

// Wait returns nil when key may be free: at once if fewer than a quorum of nodes hold
// a lock on it, else when a release is published on any node (Unlock, and the
// clean-up of a failed attempt, publish on the key's channel on every node they
// release) or when enough of the holders' locks have expired, by the nodes' remaining
// times to live, that the free nodes could form a quorum. A nil return is a hint,
// not a lease: call TryLock.
//
// It subscribes to the key's channel on every node first, and reads the locks only
// once N-quorum+1 subscriptions are confirmed: any quorum that holds the key shares
// a node with them, so its release is not missed. Subscriptions that are not
// confirmed within Options.NodeTimeout only cost latency: the times to live still
// bound the wait. A node that does not answer the read counts as held for good; when
// fewer than a quorum of nodes answer, Wait returns an error that does not wrap
// ErrLocked (distlock.Lock then backs off). When ctx ends while key is held it
// returns errors.Join(distlock.ErrLocked, ctx.Err()).
//
// The Waits of one Locker share one pub/sub connection per node, opened by the first
// Wait and closed a few seconds after the last one ends (or by Close, or when the
// client is closed); a Wait that follows another on the same key finds its channel
// still subscribed.
func (l *Locker) Wait(ctx context.Context, key string) error {
	if err := distlock.ValidateKey(key, l.opts.MaxKeyLen); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return errors.Join(distlock.ErrLocked, err)
	}
	n := l.names(key)
	ls := &listener{woke: make(chan struct{}, 1), confirmed: make(chan confirmation, 4*len(l.nodes))}
	for _, h := range l.hubs {
		h.register(n.channel, ls)
	}
	defer func() {
		for _, h := range l.hubs {
			h.unregister(n.channel, ls)
		}
	}()

	// Wait for enough subscriptions, bounded by the node timeout.
	t := time.NewTimer(l.opts.NodeTimeout)
	defer t.Stop()
	need := len(l.nodes) - l.quorum + 1
	ok := make([]bool, len(l.nodes))
	settled := make([]bool, len(l.nodes))
	for nok, nsettled := 0, 0; nok < need && nsettled < len(l.nodes); {
		select {
		case c := <-ls.confirmed:
			if !settled[c.i] {
				settled[c.i] = true
				nsettled++
			}
			if c.err == nil && !ok[c.i] {
				ok[c.i] = true
				nok++
			}
		case <-ls.woke:
			return nil
		case <-t.C:
			nok = need // give up on the rest; they may still confirm and wake us
		case <-ctx.Done():
			return errors.Join(distlock.ErrLocked, ctx.Err())
		}
	}

	// Read the locks; a release meanwhile ends the wait at once.
	type bound struct {
		d   time.Duration
		err error
	}
	bc := make(chan bound, 1)
	go func() {
		d, err := l.waitBound(ctx, n)
		bc <- bound{d, err}
	}()
	select {
	case b := <-bc:
		if b.err != nil {
			if ctx.Err() != nil {
				return errors.Join(distlock.ErrLocked, ctx.Err())
			}
			return fmt.Errorf("redlock: Wait for key %s: %w", showKey(key), b.err)
		}
		if b.d <= 0 {
			return nil
		}
		t.Reset(b.d)
	case <-ls.woke:
		return nil
	case <-ctx.Done():
		return errors.Join(distlock.ErrLocked, ctx.Err())
	}
	select {
	case <-ls.woke:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return errors.Join(distlock.ErrLocked, ctx.Err())
	}
}

// waitBound reads every node's lock and returns how long until the free nodes could
// form a quorum: zero when they can now. Nodes that do not answer count as held for
// good; an error means that fewer than a quorum answered.
func (l *Locker) waitBound(ctx context.Context, n names) (time.Duration, error) {
	res := fanout(ctx, l, nil, l.opts.NodeTimeout, func(ctx context.Context, i int) (time.Duration, error) {
		return l.nodes[i].c.PTTL(ctx, n.lock).Result()
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
	var held []time.Duration
	for _, r := range res {
		if r.err != nil {
			continue
		}
		answered++
		// go-redis reports PTTL's -2 (no key) and -1 (no expiry) as these durations.
		switch {
		case r.v == -2:
			free++
		case r.v < 0:
			held = append(held, noTTLBound)
		default:
			// PTTL truncates to the millisecond: add one so that the bound falls
			// after the node's expiry, not just before it.
			held = append(held, r.v+time.Millisecond)
		}
	}
	if answered < l.quorum {
		return 0, fmt.Errorf("only %d of %d nodes answered (quorum %d): %w", answered, len(l.nodes), l.quorum, errors.Join(nodeErrors(l, res)...))
	}
	if free >= l.quorum {
		return 0, nil
	}
	// The quorum-free-th shortest hold frees the last node a quorum needs.
	slices.Sort(held)
	return held[l.quorum-free-1], nil
}
