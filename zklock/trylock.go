package zklock

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// TryLock makes one attempt to acquire key: it creates a protected
// ephemeral-sequential node under the key's node and holds the lock when that node has
// the lowest sequence number among the key's lock nodes; otherwise it deletes its node
// and returns an error wrapping distlock.ErrLocked. The lease's Fence is the node's
// czxid; its Expires is the request's start + min(ttl, 2/3 S - TickTime/2), S the
// granted session timeout (see "How long a lease is held" in the package doc).
//
// When ctx ends first, TryLock returns ctx's error at once and the attempt finishes in
// the background, which deletes the node if it was created; so when Close runs
// first, with an error wrapping distlock.ErrClosed. A node whose create lost
// its reply (the connection broke) is found again by its protected id: it is used, or
// deleted, never left behind. Errors are *distlock.OpError.
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	fail := func(err error) (distlock.Lease, error) {
		return distlock.Lease{}, opError("TryLock", key, err)
	}
	if err := driver.ValidateKey(key, MaxKeyLen); err != nil {
		return fail(err)
	}
	if err := driver.ValidateTTL(ttl); err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	const (
		pending int32 = iota
		delivered
		abandoned
	)
	var state atomic.Int32
	res := make(chan outcome, 1)
	start := time.Now()
	a := &attempt{l: l, key: key, keyPath: l.keyPath(key), id: driver.NewToken(), start: start, ttl: ttl, abandon: ctx.Done()}
	if !l.spawn(func() {
		o, cleanup := a.run()
		release := func() {
			// Nobody will Unlock the lock that was won: release it.
			node, session := o.node, o.session
			cleanup = then(cleanup, func() { l.reapNode(node, session) })
		}
		if o.err == nil && !l.addHeld(o.lease.Token, &heldLease{key: o.lease.Key, session: o.session, fence: o.lease.Fence, least: o.least, expires: o.lease.Expires}) {
			release() // Close ran meanwhile
			o = a.fail(distlock.ErrClosed)
		}
		if state.CompareAndSwap(pending, delivered) {
			res <- o
		} else if o.err == nil {
			// The caller gave up before the lock was won.
			l.dropHeld(o.lease.Token)
			release()
		}
		if cleanup != nil {
			cleanup()
		}
	}) {
		return fail(distlock.ErrClosed)
	}
	select {
	case o := <-res:
		return o.lease, o.err
	case <-ctx.Done():
		if state.CompareAndSwap(pending, abandoned) {
			return fail(fmt.Errorf("%w (the attempt finishes, and cleans up, in the background)", ctx.Err()))
		}
	case <-l.done:
		// Close ran: a lock that the attempt wins is released (addHeld fails).
		if state.CompareAndSwap(pending, abandoned) {
			return fail(fmt.Errorf("%w (the attempt finishes, and cleans up, in the background)", distlock.ErrClosed))
		}
	}
	o := <-res
	return o.lease, o.err
}

// outcome is the result of an attempt.
type outcome struct {
	lease   distlock.Lease
	node    string        // the lock node, when won
	session int64         // its session, when won
	least   time.Duration // the smallest session timeout granted, when won
	err     error
}

// attempt is one TryLock.
type attempt struct {
	l       *Locker
	key     string
	keyPath string
	id      string // the protected id of the nodes it creates
	start   time.Time
	ttl     time.Duration
	abandon <-chan struct{} // the caller's ctx.Done(): stop retrying
	backoff time.Duration
	// pipeline: the attempt follows a Wait (it claimed a waiter node), so the key
	// has other children: list them along with the create (see lock).
	pipeline bool
	// waiter is the waiter node that the attempt claimed (see Wait), if any: the
	// multi that creates the lock node deletes it (waiterGone), so that the next
	// waiter moves up as our lock node appears; otherwise run deletes it after.
	waiter     string
	waiterGone bool
}

func (a *attempt) abandoned() bool {
	select {
	case <-a.abandon:
		return true
	default:
		return false
	}
}

// again reports whether the attempt should retry after err, and waits a little first.
// A connection error is retried while the caller waits, the Locker is open and the
// attempt is younger than the session timeout (a connection that stays down longer
// than that has lost its session anyway).
func (a *attempt) again(err error) bool {
	if !retriable(err) || a.abandoned() || time.Since(a.start) > a.l.sess.Timeout() {
		return false
	}
	a.backoff = min(max(2*a.backoff, retryMinBackoff), retryMaxBackoff)
	t := time.NewTimer(a.backoff)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-a.abandon:
		return false
	case <-a.l.done:
		return false
	}
}

func (a *attempt) fail(err error) outcome {
	return outcome{err: opError("TryLock", a.key, err)}
}

// run makes the attempt. cleanup, when not nil, is work that must follow in the
// background whatever the caller does: removing nodes the attempt may have left, and
// the waiter node (see Wait) that this TryLock claimed.
func (a *attempt) run() (o outcome, cleanup func()) {
	var w string
	if pw := a.l.claimWait(a.keyPath); pw != nil && pw.pre != nil {
		// The Wait's lock node holds the lock: take it over, then delete the waiter
		// node, so that the next waiter moves up.
		o, cleanup = a.claimPre(pw.pre)
		return o, then(cleanup, func() { a.l.reapNode(pw.path, 0) })
	} else if pw != nil {
		w = pw.path
	}
	a.pipeline, a.waiter = w != "", w
	o, cleanup = a.lock()
	if w != "" && !a.waiterGone {
		// Now that our lock node exists (or lost), let the next waiter move up.
		prev := cleanup
		cleanup = func() {
			if prev != nil {
				prev()
			}
			a.l.reapNode(w, 0)
		}
	}
	return o, cleanup
}

// won returns the outcome of an attempt whose lock node, node, has the lowest
// sequence number: its lease has the Fence czxid (the node's) and, owned by session,
// Expires = start + the validity. cleanup is the background work that follows.
func (a *attempt) won(node string, czxid, session int64, cleanup func()) (outcome, func()) {
	seq, _ := parseContender(node[len(a.keyPath)+1:])
	h := handle{id: a.id, seq: seq.seq}
	valid, least := a.l.validity(a.ttl)
	lease := distlock.Lease{
		Key:     a.key,
		Token:   h.token(),
		Fence:   uint64(czxid),
		Expires: a.start.Add(valid),
	}
	if !lease.Expires.After(time.Now()) {
		// The answers came after the lease's validity ran out: a lease that has
		// already expired is of no use, and its node must not keep the key.
		return a.fail(fmt.Errorf("the lock was won, but its validity %v ran out before the answers came (%v after the request): the node is deleted", valid, time.Since(a.start).Round(time.Millisecond))),
			then(cleanup, func() { a.l.reapNode(node, session) })
	}
	return outcome{lease: lease, node: node, session: session, least: least}, cleanup
}

// then returns a function that calls first (if not nil), then next. (A closure
// that called a named result of the function returning it would call itself.)
func then(first, next func()) func() {
	return func() {
		if first != nil {
			first()
		}
		next()
	}
}

func cleanupIf(cond bool, f func()) func() {
	if cond {
		return f
	}
	return nil
}
