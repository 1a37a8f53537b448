package zklock

import (
	"time"
)

// outcome is the result of an attempt: the lease it won, or err.
type outcome struct {
	grant grant
	err   error
}

// fence returns the won lease's Fence, or 0.
func (o outcome) fence() uint64 {
	if o.grant.h == nil {
		return 0
	}
	return o.grant.h.fence
}

// attempt is one Acquire: the protocol of the classic lock recipe on protected
// ephemeral-sequential nodes.
type attempt struct {
	l       *Locker
	key     string
	keyPath string
	id      string // the protected id of the nodes it creates: the core's token
	start   time.Time
	ttl     time.Duration
	abandon <-chan struct{} // the caller's ctx.Done(): stop waiting
	// pipeline: the attempt follows a Wait (it claimed a waiter node), so the key
	// has other children: list them along with the create (see lock).
	pipeline bool
	// waiter is the waiter node that the attempt claimed (see Wait), if any: the
	// multi that creates the lock node deletes it (waiterGone), so that the next
	// waiter moves up as our lock node appears; otherwise run deletes it after.
	waiter     string
	waiterGone bool
}

func (a *attempt) fail(err error) outcome {
	return outcome{err: asConnClosed(err)}
}

// run makes the attempt. cleanup, when not nil, is work that must follow in the
// background whatever the caller does: removing nodes the attempt may have left
// (also after an unknown outcome: by id, see reapByID), and the waiter node (see
// Wait) that this attempt claimed.
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
		cleanup = then(cleanup, func() { a.l.reapNode(w, 0) })
	}
	return o, cleanup
}

// won returns the outcome of an attempt whose lock node, node, has the lowest
// sequence number: its lease has the Fence czxid (the node's), owned by session.
// The core counts its Expires and refuses a late reply. cleanup is the background
// work that follows.
func (a *attempt) won(node string, czxid, session int64, cleanup func()) (outcome, func()) {
	seq, _ := parseContender(node[len(a.keyPath)+1:])
	h := handle{id: a.id, seq: seq.seq}
	_, least := a.l.validity(a.ttl)
	held := &heldLease{key: a.key, session: session, fence: uint64(czxid), least: least}
	return outcome{grant: grant{h: held, token: h.token()}}, cleanup
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
