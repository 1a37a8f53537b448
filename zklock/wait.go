package zklock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// lowest returns the contender with the lowest sequence number among children, and
// false when there is none.
func lowest(children []string) (contender, bool) {
	var low contender
	found := false
	for _, name := range children {
		if c, ok := parseContender(name); ok && (!found || c.seq < low.seq) {
			low, found = c, true
		}
	}
	return low, found
}

// claimWindow is how long a waiter node stays in the queue after Wait returned nil,
// for the TryLock that follows (distlock.Lock calls it at once) to claim it.
const claimWindow = time.Second

// A pendingWait is a waiter node whose Wait returned nil: the next TryLock of its key
// by this Locker claims it and deletes it once its own lock node exists.
type pendingWait struct {
	path  string
	pre   *preLock    // the head waiter's lock node, which holds the lock; or nil
	timer *time.Timer // deletes the nodes if nobody claims them within claimWindow
}

// reap deletes w's nodes: its lock node first, which holds the key.
func (l *Locker) reapPending(w *pendingWait) {
	if w.pre != nil {
		l.reapNode(w.pre.node, w.pre.owner)
	}
	l.reapNode(w.path, 0)
}

// addPending records the waiter node path of keyPath, and its lock node pre (or
// nil), for a TryLock to claim. It returns false after Close: the caller deletes the
// nodes.
func (l *Locker) addPending(keyPath, path string, pre *preLock) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	w := &pendingWait{path: path, pre: pre}
	w.timer = time.AfterFunc(claimWindow, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.removePendingLocked(keyPath, w) {
			l.bg(func() { l.reapPending(w) })
		}
	})
	l.pending[keyPath] = append(l.pending[keyPath], w)
	return true
}

// removePendingLocked removes w from keyPath's pending waiter nodes; l.mu is held.
func (l *Locker) removePendingLocked(keyPath string, w *pendingWait) bool {
	ws := l.pending[keyPath]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i], ws[i+1:]...)
			if len(ws) == 0 {
				delete(l.pending, keyPath)
			} else {
				l.pending[keyPath] = ws
			}
			return true
		}
	}
	return false
}

// claimWait takes the oldest pending Wait of keyPath, if any, for a TryLock: to take
// over its lock node, if it has one, or to delete its waiter node once its own lock
// node exists; nil when there is none.
func (l *Locker) claimWait(keyPath string) *pendingWait {
	l.mu.Lock()
	defer l.mu.Unlock()
	ws := l.pending[keyPath]
	if len(ws) == 0 {
		return nil
	}
	w := ws[0]
	w.timer.Stop()
	l.removePendingLocked(keyPath, w)
	return w
}

// Wait returns nil when key may be free. When no lock node exists it returns at once.
// Otherwise it joins the key's queue of waiters with an ephemeral-sequential waiter
// node (_w_<id>-wait-lock-<seq>, not a contender) and watches the waiter node 3
// places before its own; among the first 3 waiters (preWaiters), it makes a lock
// node while it waits, a contender queued behind the holder as zk.Lock's waiters
// are, and watches the few contenders before it: its lock node holds the lock once
// they are gone; Wait then returns nil, and this Locker's next TryLock of key takes
// that lease over without a request. So a release wakes one waiter, not all of them
// (no herd), waiters are woken in the order they came, and a handoff costs no round
// trip after the release's watch event. When ctx ends first it returns
// errors.Join(distlock.ErrLocked, ctx.Err()) and its nodes are deleted in the
// background.
//
// After Wait returns nil, its nodes stay until this Locker's next TryLock of key
// claims them (deleting the waiter node, so that the next waiter moves up), or for at
// most a second. distlock.Lock calls TryLock at once; a caller that does not keeps
// the key from everyone else for that second. A holder that ends without Unlock (its
// session expired) wakes the next waiter as a release does. Errors are
// *distlock.OpError.
func (l *Locker) Wait(ctx context.Context, key string) error {
	if err := driver.ValidateKey(key, MaxKeyLen); err != nil {
		return opError("Wait", key, err)
	}
	if err := ctx.Err(); err != nil {
		return opError("Wait", key, errors.Join(distlock.ErrLocked, err))
	}
	cctx, end, err := l.calls.Begin(ctx)
	if err != nil {
		return opError("Wait", key, err)
	}
	defer end()
	switch err := l.wait(cctx, l.keyPath(key)); {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return opError("Wait", key, errors.Join(distlock.ErrLocked, ctx.Err()))
	default:
		return opError("Wait", key, driver.Err(cctx, err))
	}
}

// wait is Wait's work, on cctx, the call's context: it returns nil when the key
// may be free, or cctx's error when it ends first (or another).
func (l *Locker) wait(cctx context.Context, keyPath string) error {
	free, err := call(cctx, func() (bool, error) {
		children, _, err := l.conn.Children(keyPath)
		if errors.Is(err, zk.ErrNoNode) {
			return true, nil
		}
		_, held := lowest(children)
		return !held, err
	})
	if err != nil || free {
		return err
	}
	const (
		pending int32 = iota
		delivered
		abandoned
	)
	var state atomic.Int32
	res := make(chan error, 1)
	l.bg(func() {
		path, pre, err := l.queue(cctx.Done(), keyPath)
		// A queue that cctx's end abandoned delivers nothing: the caller sees
		// cctx end too.
		if !errors.Is(err, errAbandoned) && state.CompareAndSwap(pending, delivered) {
			if err == nil && path != "" && l.addPending(keyPath, path, pre) {
				path, pre = "", nil
			}
			res <- err
		}
		if pre != nil {
			l.reapNode(pre.node, pre.owner)
		}
		if path != "" {
			l.reapNode(path, 0)
		}
	})
	select {
	case err := <-res:
		return err
	case <-cctx.Done():
		if state.CompareAndSwap(pending, abandoned) {
			return cctx.Err()
		}
		return <-res
	}
}

// preWaiters is how many waiters at the head of a key's queue make a lock node
// while they wait (see queue), so that each is ready, its lock node queued and its
// watch set, when its turn comes, even when the holders before it hold the key
// only briefly.
const preWaiters = 3

// errAbandoned ends a queue whose caller gave up.
var errAbandoned = errors.New("zklock: wait abandoned")

// queue joins keyPath's waiter queue and returns when the key may be free, with the
// path of its waiter node ("" when it made none) and, when the queue's head made a
// lock node that now holds the lock, that node (see preLock); on an error, path and
// pre are nodes to delete (or "" and nil).
//
// A waiter with preWaiters or more waiters before it watches the waiter node
// preWaiters places before its own. Among the first preWaiters it makes a lock node, a
// contender queued behind the holder, and watches the contenders before that
// (awaitLower): when they are gone, the lock is ours, without another request. A
// waiter whose lock node cannot be made (the key node grants no write, the
// connection broke) watches the waiter node just before its own, or at the head the
// holder's node, and the TryLock that follows does the rest.
func (l *Locker) queue(abandon <-chan struct{}, keyPath string) (path string, pre *preLock, err error) {
	w := &waiter{l: l, keyPath: keyPath, abandon: abandon, noPre: !l.o.WaitContends}
	if err := w.join(); w.path == "" || err != nil {
		return w.path, nil, err
	}
	for {
		children, _, err := l.conn.Children(keyPath)
		if errors.Is(err, zk.ErrNoNode) {
			return w.path, nil, nil // free; our lock node, if any, went with the key node
		}
		if err != nil {
			return w.path, w.pre, err
		}
		var done bool
		if w.pre != nil {
			done, err = w.awaitTurn(children)
		} else {
			done, err = w.step(children)
		}
		if done || err != nil {
			return w.path, w.pre, err
		}
	}
}

// A waiter is one Wait's place in its key's waiter queue (see queue).
type waiter struct {
	l       *Locker
	keyPath string
	abandon <-chan struct{} // the caller gave up
	path    string          // the waiter node
	me      contender       // its parsed name
	pre     *preLock        // its lock node, when it has one
	noPre   bool            // it makes no lock node (Options.WaitContends is off, or it failed)
}

// join creates the waiter node (w.path stays "" when the key's node is gone: the
// key is free). After a lost reply it deletes whatever the create made.
func (w *waiter) join() error {
	id := driver.NewToken()
	path, err := w.l.conn.Create(waitNodePrefix(w.keyPath, id), nil, zk.FlagEphemeralSequential, w.l.o.ACL)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil // the key's node is gone: free
	case connBroke(err):
		// The create may have been applied: remove whatever it made.
		w.l.reapWaiterID(w.keyPath, id)
		return err
	case err != nil:
		return err
	}
	w.path = path
	me, ok := parseWaiter(path[len(w.keyPath)+1:])
	if !ok {
		return fmt.Errorf("unexpected waiter node name %s", path[len(w.keyPath)+1:])
	}
	w.me = me
	return nil
}

// awaitTurn is one round of a waiter whose lock node (w.pre) is queued behind the
// holder: it watches the contenders lower than its lock node (awaitLower), and is
// done when they are gone (the lock is ours) or when the watches ended with the
// session or the connection (the key may be free, and our lock node may be gone:
// it is deleted, and w.pre is nil).
func (w *waiter) awaitTurn(children []string) (done bool, err error) {
	lower, ok := below(children, w.pre.node[len(w.keyPath)+1:])
	if !ok { // our lock node is gone: the session ended
		w.pre, w.noPre = nil, true
		return false, nil
	}
	switch r, err := w.l.awaitLower(w.abandon, w.keyPath, lower); {
	case err != nil:
		return true, err
	case r == lowerGone:
		return true, nil // ours is the lowest: the lock is ours
	case r == lowerLost:
		w.l.reapNode(w.pre.node, w.pre.owner)
		w.pre, w.noPre = nil, true
		return true, nil
	}
	return false, nil
}

// step is one round of a waiter without a lock node: done when no lock node holds
// the key; among the first preWaiters (unless w.noPre), it makes its lock node;
// otherwise it watches the waiter preWaiters places before it (or the one just
// before, with w.noPre), or the holder's node when no waiter is before it.
func (w *waiter) step(children []string) (done bool, err error) {
	holder, held := lowest(children)
	if !held {
		return true, nil // free
	}
	var ahead []contender // the waiters before us
	for _, name := range children {
		if x, ok := parseWaiter(name); ok && x.seq < w.me.seq {
			ahead = append(ahead, x)
		}
	}
	if len(ahead) < preWaiters && !w.noPre {
		if w.pre, err = w.l.contend(w.keyPath); err != nil {
			w.noPre = true
		}
		return false, nil
	}
	target := holder.name
	if len(ahead) > 0 {
		// When the waiter we watch goes, we are among the first preWaiters (or the
		// first). Each waiter node has one watcher at most.
		slices.SortFunc(ahead, func(a, b contender) int { return cmp.Compare(a.seq, b.seq) })
		k := 1
		if !w.noPre {
			k = preWaiters
		}
		target = ahead[len(ahead)-k].name
	}
	return w.watch(target)
}

// watch waits for the node target (a waiter's, or the holder's) to go: done when it
// was the holder's or when the watch ended with the session or the connection (the
// key may be free); not done when a waiter before us left (we move up) or target
// was gone already (GetW on a node that is gone sets no watch: look again).
func (w *waiter) watch(target string) (done bool, err error) {
	_, _, watch, err := w.l.conn.GetW(w.keyPath + "/" + target)
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	select {
	case ev := <-watch:
		return ev.Type == zk.EventNotWatching || parseContenderOK(target), nil
	case <-w.abandon:
		return false, errAbandoned
	}
}

// parseContenderOK reports whether name is a contender's.
func parseContenderOK(name string) bool {
	_, ok := parseContender(name)
	return ok
}

// reapWaiterID deletes the waiter nodes of keyPath with id. It syncs the server
// with the leader first, as findOwn does: after a lost reply the client may have
// reconnected to a server that has not applied the create yet.
func (l *Locker) reapWaiterID(keyPath, id string) {
	l.reap(func() (bool, error) {
		if _, err := l.conn.Sync(keyPath); err != nil {
			return errors.Is(err, zk.ErrNoNode) || !retriable(err), err
		}
		children, _, err := l.conn.Children(keyPath)
		if err != nil {
			return errors.Is(err, zk.ErrNoNode) || !retriable(err), err
		}
		for _, name := range children {
			if w, ok := parseWaiter(name); ok && w.id == id {
				if err := l.conn.Delete(keyPath+"/"+name, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
					return !retriable(err), err
				}
			}
		}
		return true, nil
	})
}
