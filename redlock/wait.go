package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/redisx"
)

// Wait returns nil when key may be free: at once if fewer than a quorum of nodes hold
// a lock on it, else when it is this Wait's turn after a release of a holder that
// the Locker saw (Unlock, and the clean-up of a failed attempt, publish the SHA-1 of
// the released token on the key's channel on every node they release), or after a
// release that names the Locker's turn (see the package documentation), or when
// enough of the holders' locks have expired, by the nodes' remaining times to live,
// that the free nodes could form a quorum. The Waits of one Locker on a key wake one
// at a time: a release wakes the first, and the next one wakes when the woken caller
// does not start a TryLock of the key within the handoff time, or that attempt fails
// for another reason than contention (see the package documentation). A nil return
// is a hint, not a lease: call TryLock.
//
// It subscribes to the key's channel and to the Locker's turn channel of the key
// (a release that names the Locker goes there: see the package documentation) on
// every node first, and reads the locks once N-quorum+1 subscriptions of the key's
// channel are confirmed: any quorum that holds the key shares a node with them, so
// its release is not missed (a release that names the Locker goes to the key's
// channel while its turn channel has no subscriber). The read adds the Locker to
// the key's turns on the nodes where the key is held. Until then (a subscription that a
// dead connection never confirms, or one not confirmed within Options.NodeTimeout)
// a read of the locks sent at once bounds the wait by the holders' times to live. A
// node that does not answer the read counts as held for good; when fewer than a
// quorum of nodes answer, Wait returns an error that does not wrap ErrLocked
// (distlock.Lock then backs off). The read is skipped when the Locker's last
// TryLock of the key found it held on N-quorum+1 nodes whose channels were
// subscribed, with no message since.
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
	if err := driver.ValidateKey(key, MaxKeyLen); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return errors.Join(distlock.ErrLocked, err)
	}
	n := l.names(key)
	// ls hears the key's channel (its confirmations count), lt the Locker's turn
	// channel of the key (turns.go).
	ls := redisx.NewInboxListener(len(l.nodes))
	lt := redisx.NewInboxListener(len(l.nodes))
	tc := turnChannel(n, l.id)
	in := inboxes{ls.Inbox(), lt.Inbox()}
	registered, turnRegistered := 0, 0
	defer func() {
		for _, node := range l.nodes[:registered] {
			node.Hub.Unregister(n.Channel, ls)
		}
		for _, node := range l.nodes[:turnRegistered] {
			node.Hub.Unregister(tc, lt)
		}
	}()
	for _, node := range l.nodes {
		if err := node.Hub.Register(n.Channel, ls); err != nil {
			return err
		}
		registered++
	}
	for _, node := range l.nodes {
		if err := node.Hub.Register(tc, lt); err != nil {
			return err
		}
		turnRegistered++
	}
	// Messages that arrive from now on are kept in the Inbox until taken; one that
	// matters wakes the first waiter of the key's line (herd.go), maybe this one.
	// Only the key's reader takes them (readers.go): ready is nil until this Wait
	// is the reader.
	qw := l.queue.Join(key)
	rd := l.readers.join(key, in.key)
	var ready, turnReady <-chan struct{}
	defer func() {
		if ready != nil {
			l.released(key, in.take())
		}
		l.readers.leave(key, rd)
		qw.Leave()
		l.forget(key)
	}()
	promoted := func() {
		ready, turnReady = in.key.Ready(), in.turn.Ready()
		l.released(key, in.take())
	}
	w := &waiter{Waiting: redisx.NewWaiting(ctx), l: l, ctx: ctx, n: n, key: key}
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
	if until, ok := l.sighted(n); ok {
		// This Locker's last TryLock found the key held on enough nodes while
		// their channels were subscribed, and no message came since: a release
		// from now on is not missed, and the read is not needed.
		w.HeldUntil(until)
		goto wait
	}
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
			case <-ready:
				l.released(key, in.take())
			case <-turnReady:
				l.released(key, in.take())
			case <-rd.promote:
				promoted()
			case <-qw.Woken():
				return w.woke()
			case <-ls.Woke():
				return w.woke()
			case <-lt.Woke():
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
wait:
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
		case <-ready:
			l.released(key, in.take())
		case <-turnReady:
			l.released(key, in.take())
		case <-rd.promote:
			promoted()
		case <-qw.Woken():
			return w.woke()
		case <-ls.Woke():
			return w.woke()
		case <-lt.Woke():
			return w.woke()
		case <-w.Bound:
			return nil
		case <-ctx.Done():
			return w.GaveUp()
		}
	}
}

// inboxes are a Wait's Inboxes: of the key's channel and of the Locker's turn
// channel of the key.
type inboxes struct{ key, turn *redisx.Inbox }

// take takes the messages of both Inboxes.
func (in inboxes) take() []string { return append(in.key.Take(), in.turn.Take()...) }

// A waiter is one Wait's state and its key.
type waiter struct {
	*redisx.Waiting
	l   *Locker
	ctx context.Context
	n   redisx.Names
	key string
}

// A bound is what a read of every node's lock says: the key is free (a quorum of
// nodes could lock it now), or it is held until at most until.
type bound struct {
	until time.Time
	free  bool
}

// readBound reads every node's lock in the background.
func (w *waiter) readBound() <-chan redisx.Result[bound] {
	return redisx.Async(w.l.group, func() (bound, error) { return w.l.waitBound(w.ctx, w.key, w.n) })
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
// an error means that fewer than a quorum answered. The holders it sees join the
// Locker's view of key (herd.go), and, unless the Locker is queued, the nodes where
// it finds the key held add it to the key's turns (waitScript, turnScore), which
// makes it queued.
func (l *Locker) waitBound(ctx context.Context, key string, n redisx.Names) (bound, error) {
	keys := []string{n.Lock, turnsName(n, key)}
	var args []any
	if score, join := l.turnScore(key); join {
		args = []any{l.idArg, score}
	}
	type view struct {
		digest string
		pttl   time.Duration // -2ns (go-redis' PTTL of no key): free
	}
	res := fanout(ctx, l, nil, l.opts.NodeTimeout, func(ctx context.Context, i int) (view, error) {
		v, err := l.nodes[i].Run(ctx, waitScript, keys, args...).Slice()
		if errors.Is(err, redis.Nil) {
			return view{pttl: -2}, nil
		}
		if err != nil {
			return view{}, err
		}
		if len(v) != 2 {
			return view{}, fmt.Errorf("unexpected reply %#v from the wait script", v)
		}
		d, _ := v[0].(string)
		ms, _ := v[1].(int64)
		pttl := time.Duration(ms) * time.Millisecond
		if ms < 0 {
			pttl = -1 // no time to live (-2 cannot be: the script read the key)
		}
		return view{digest: d, pttl: pttl}, nil
	}, nil, func(res []reply[view]) bool {
		free, failed := 0, 0
		for _, r := range res {
			switch {
			case r.err != nil:
				failed++
			case !r.answered:
			case r.v.pttl == -2:
				free++
			}
		}
		return free >= l.quorum || failed > len(l.nodes)-l.quorum
	}, false)
	free, answered := 0, 0
	var held []time.Time
	holders := make(map[string]int)
	for _, r := range res {
		if r.err != nil {
			continue
		}
		answered++
		until, isFree := redisx.Bound(r.v.pttl)
		if isFree {
			free++
		} else {
			held = append(held, until)
			holders[r.v.digest]++
		}
	}
	if answered < l.quorum {
		return bound{}, fmt.Errorf("only %d of %d nodes answered (quorum %d): %w", answered, len(l.nodes), l.quorum, errors.Join(nodeErrors(l, res)...))
	}
	if len(held) > 0 && l.queue.Len(key) > 0 {
		l.queued(key, true) // waitScript added l to the turns where it is held
	}
	if free >= l.quorum {
		return bound{free: true}, nil
	}
	l.learn(key, holders, len(l.nodes)-len(held))
	// The quorum-free-th earliest expiry frees the last node a quorum needs.
	slices.SortFunc(held, time.Time.Compare)
	return bound{until: held[l.quorum-free-1]}, nil
}
