package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
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
	timer *time.Timer // deletes the node if nobody claims it within claimWindow
}

// addPending records the waiter node path of keyPath for a TryLock to claim. It
// returns false after Close: the caller deletes the node.
func (l *Locker) addPending(keyPath, path string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	w := &pendingWait{path: path}
	w.timer = time.AfterFunc(claimWindow, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.removePendingLocked(keyPath, w) {
			l.spawnLocked(func() { l.reapNode(path, 0) })
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

// claimWait takes the oldest pending waiter node of keyPath, if any, for a TryLock
// to delete once its own lock node exists; "" when there is none.
func (l *Locker) claimWait(keyPath string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ws := l.pending[keyPath]
	if len(ws) == 0 {
		return ""
	}
	w := ws[0]
	w.timer.Stop()
	l.removePendingLocked(keyPath, w)
	return w.path
}

// Wait returns nil when key may be free. When no lock node exists it returns at once.
// Otherwise it joins the key's queue of waiters with an ephemeral-sequential waiter
// node (_w_<id>-wait-<seq>, not a contender: it never blocks TryLock) and watches one
// node only: the waiter node just before its own, or, at the head of the queue, the
// holder's lock node. So a release wakes one waiter, not all of them (no herd), and
// waiters are woken in the order they came. When ctx ends first it returns
// errors.Join(distlock.ErrLocked, ctx.Err()) and its waiter node is deleted in the
// background.
//
// After Wait returns nil, the head waiter's node stays in the queue, so that the waiters
// behind it keep waiting, until this Locker's next TryLock of key has created its lock
// node (then that TryLock deletes it), or for at most a second. distlock.Lock calls
// TryLock at once; a caller that does not delays the waiters behind it by that second.
// A holder that ends without Unlock (its session expired) wakes the head as a release
// does. Errors are *distlock.OpError.
func (l *Locker) Wait(ctx context.Context, key string) error {
	locked := func(err error) error {
		return opError("Wait", key, errors.Join(distlock.ErrLocked, err))
	}
	failed := func(err error) error { return opError("Wait", key, err) }
	if err := distlock.ValidateKey(key, MaxKeyLen); err != nil {
		return failed(err)
	}
	if err := ctx.Err(); err != nil {
		return locked(err)
	}
	if l.isClosed() {
		return failed(distlock.ErrClosed)
	}
	keyPath := l.keyPath(key)
	free, err := call(ctx, func() (bool, error) {
		children, _, err := l.conn.Children(keyPath)
		if errors.Is(err, zk.ErrNoNode) {
			return true, nil
		}
		_, held := lowest(children)
		return !held, err
	})
	switch {
	case ctx.Err() != nil:
		return locked(ctx.Err())
	case err != nil:
		return failed(err)
	case free:
		return nil
	}

	const (
		pending int32 = iota
		delivered
		abandoned
	)
	var state atomic.Int32
	res := make(chan error, 1)
	if !l.spawn(func() {
		path, err := l.queue(ctx.Done(), keyPath)
		// A queue that ctx's end abandoned delivers nothing: the caller, which sees
		// ctx end too, reports it as contention (errors.Join(ErrLocked, ctx.Err())).
		if !errors.Is(err, errAbandoned) && state.CompareAndSwap(pending, delivered) {
			if err == nil && path != "" && l.addPending(keyPath, path) {
				path = ""
			}
			res <- err
		}
		if path != "" {
			l.reapNode(path, 0)
		}
	}) {
		return failed(distlock.ErrClosed)
	}
	select {
	case err := <-res:
		if err != nil {
			return failed(err)
		}
		return nil
	case <-ctx.Done():
		if state.CompareAndSwap(pending, abandoned) {
			return locked(ctx.Err())
		}
		if err := <-res; err != nil {
			return failed(err)
		}
		return nil
	}
}

// errAbandoned ends a queue whose caller gave up.
var errAbandoned = errors.New("zklock: wait abandoned")

// queue joins keyPath's waiter queue and returns when the key may be free, with the
// path of its waiter node ("" when it made none); on an error, path is a node to
// delete (or "").
func (l *Locker) queue(abandon <-chan struct{}, keyPath string) (path string, err error) {
	id := distlock.NewToken()
	path, err = l.conn.Create(waitNodePrefix(keyPath, id), nil, zk.FlagEphemeralSequential, l.o.ACL)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return "", nil // the key's node is gone: free
	case errors.Is(err, zk.ErrConnectionClosed):
		// The create may have been applied: remove whatever it made.
		l.reapWaiterID(keyPath, id)
		return "", err
	case err != nil:
		return "", err
	}
	me, ok := parseWaiter(path[len(keyPath)+1:])
	if !ok {
		return path, fmt.Errorf("unexpected waiter node name %s", path[len(keyPath)+1:])
	}
	for {
		children, _, err := l.conn.Children(keyPath)
		if errors.Is(err, zk.ErrNoNode) {
			return path, nil
		}
		if err != nil {
			return path, err
		}
		holder, held := lowest(children)
		if !held {
			return path, nil // free
		}
		target, head := holder.name, true
		var pred contender
		for _, name := range children {
			if w, ok := parseWaiter(name); ok && w.seq < me.seq && (head || w.seq > pred.seq) {
				pred, head = w, false
			}
		}
		if !head {
			target = pred.name
		}
		// GetW on a node that is already gone sets no watch; look again.
		_, _, watch, err := l.conn.GetW(keyPath + "/" + target)
		if errors.Is(err, zk.ErrNoNode) {
			if head {
				return path, nil // released meanwhile
			}
			continue
		}
		if err != nil {
			return path, err
		}
		select {
		case ev := <-watch:
			if head || ev.Type == zk.EventNotWatching {
				// The holder's node is gone, or the watch ended with the session or
				// the connection: the key may be free.
				return path, nil
			}
			// The waiter before us left: move up.
		case <-abandon:
			return path, errAbandoned
		case <-l.done:
			return path, distlock.ErrClosed
		}
	}
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
