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
	"github.com/distlock/distlock/internal/waitq"
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
	w := &waiter{Waiting: redisx.NewWaiting(ctx), l: l, ctx: ctx, n: l.names(key), key: key}
	defer w.Stop()
	if err := w.subscribe(); err != nil {
		w.unsubscribe()
		return err
	}
	defer w.unsubscribe()
	w.join()
	defer w.leave()

	// Enough subscriptions, bounded by the node timeout and, once read, by the
	// holders' times to live.
	w.conf = newConfirmations(len(l.nodes), len(l.nodes)-l.quorum+1)
	w.conf.drain(w.ls.Confirmed()) // channels subscribed already
	if until, ok := l.sighted(w.n); ok && l.uses(useSightings) {
		// This Locker's last TryLock found the key held on enough nodes while
		// their channels were subscribed, and no message came since: a release
		// from now on is not missed, and the read is not needed.
		w.HeldUntil(until)
		_, err := w.until(nil, nil)
		return err
	}
	if w.conf.lacking() {
		t := time.NewTimer(l.opts.NodeTimeout)
		defer t.Stop()
		// Give up on the rest at the timeout; they may still confirm and wake us.
		if done, err := w.until(w.readBound(), t.C); done {
			return err
		}
	}
	// Read the locks (again): a release from now on is not missed.
	_, err := w.until(w.readBound(), nil)
	return err
}

// subscribe registers w's listeners on every node: ls on the key's channel (its
// confirmations count), lt on the Locker's turn channel of the key (turns.go).
// Messages that arrive from then on are kept in the Inboxes until taken.
func (w *waiter) subscribe() error {
	l := w.l
	w.ls = redisx.NewInboxListener(len(l.nodes))
	w.lt = redisx.NewInboxListener(len(l.nodes))
	w.tc = turnChannel(w.n, l.id)
	w.in = inboxes{w.ls.Inbox(), w.lt.Inbox()}
	for _, node := range l.nodes {
		if err := node.Hub.Register(w.n.Channel, w.ls); err != nil {
			return err
		}
		w.registered++
	}
	for _, node := range l.nodes {
		if err := node.Hub.Register(w.tc, w.lt); err != nil {
			return err
		}
		w.turnRegistered++
	}
	return nil
}

// unsubscribe undoes subscribe, as far as it went.
func (w *waiter) unsubscribe() {
	for _, node := range w.l.nodes[:w.registered] {
		node.Hub.Unregister(w.n.Channel, w.ls)
	}
	for _, node := range w.l.nodes[:w.turnRegistered] {
		node.Hub.Unregister(w.tc, w.lt)
	}
	w.registered, w.turnRegistered = 0, 0
}

// join puts w in the key's line of l's Waits: a message that matters wakes the
// first waiter of the line (herd.go), maybe this one. Only the key's reader takes
// the messages (readers.go): w.ready is nil until w is the reader.
func (w *waiter) join() {
	w.qw = w.l.queue.Join(w.key)
	w.rd = w.l.readers.join(w.key, w.in.key)
}

// leave takes w out of the key's line, acting on the messages it still holds as
// the reader.
func (w *waiter) leave() {
	l := w.l
	if w.ready != nil {
		l.released(w.key, w.in.take())
	}
	l.readers.leave(w.key, w.rd)
	w.qw.Leave()
	l.forget(w.key)
}

// until waits for w's result with read in flight (nil: none). With timeout not
// nil it also counts the subscriptions confirmed, and returns done false once
// enough are confirmed or at the timeout; otherwise it returns only when done: on a
// release, a wake-up of w's listeners or line, the holders' bound, a read that
// finds the key free or fails, or ctx's end.
func (w *waiter) until(read <-chan redisx.Result[bound], timeout <-chan time.Time) (done bool, err error) {
	var confirmed <-chan redisx.Confirmation
	if timeout != nil {
		confirmed = w.ls.Confirmed()
	}
	l, key := w.l, w.key
	for timeout == nil || w.conf.lacking() {
		select {
		case c := <-confirmed:
			w.conf.count(c)
		case <-timeout:
			return false, nil
		case r := <-read:
			read = nil
			if done, err := w.read(r); done {
				if err != nil && w.Held() {
					continue // the bound read before stands
				}
				return true, err
			}
		case <-w.ready:
			l.released(key, w.in.take())
		case <-w.turnReady:
			l.released(key, w.in.take())
		case <-w.rd.promote:
			w.ready, w.turnReady = w.in.key.Ready(), w.in.turn.Ready()
			l.released(key, w.in.take())
		case <-w.qw.Woken():
			return true, w.woke()
		case <-w.ls.Woke():
			return true, w.woke()
		case <-w.lt.Woke():
			return true, w.woke()
		case <-w.Bound:
			return true, nil
		case <-w.ctx.Done():
			return true, w.GaveUp()
		}
	}
	return false, nil
}

// confirmations count the nodes whose subscription to the key's channel was
// confirmed (ok) or failed (settled without ok).
type confirmations struct {
	ok, settled   []bool
	nok, nsettled int
	need          int
}

// newConfirmations counts the confirmations of n nodes, of which need suffice.
func newConfirmations(n, need int) *confirmations {
	return &confirmations{ok: make([]bool, n), settled: make([]bool, n), need: need}
}

func (c *confirmations) count(x redisx.Confirmation) {
	if !c.settled[x.Node] {
		c.settled[x.Node] = true
		c.nsettled++
	}
	if x.Err == nil && !c.ok[x.Node] {
		c.ok[x.Node] = true
		c.nok++
	}
}

// drain counts the confirmations that came already.
func (c *confirmations) drain(ch <-chan redisx.Confirmation) {
	for {
		select {
		case x := <-ch:
			c.count(x)
		default:
			return
		}
	}
}

// lacking reports whether fewer than need subscriptions are confirmed while some
// node has not settled yet.
func (c *confirmations) lacking() bool { return c.nok < c.need && c.nsettled < len(c.ok) }

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
	// ls hears the key's channel, lt the Locker's turn channel tc of the key, on
	// as many nodes as registered and turnRegistered say; in holds their messages.
	ls, lt                     *redisx.Listener
	tc                         string
	in                         inboxes
	registered, turnRegistered int
	conf                       *confirmations
	// The key's line of l's Waits (herd.go) and its reader (readers.go); ready
	// and turnReady are nil until w is the reader.
	qw               *waitq.Waiter
	rd               *reading
	ready, turnReady <-chan struct{}
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
