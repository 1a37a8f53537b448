package zklock

import (
	"errors"
	"time"

	"github.com/go-zookeeper/zk"
)

// Background removal of lock nodes that a call could not remove itself: the node of a
// TryLock whose caller gave up, a create whose reply was lost, an Unlock whose outcome
// is unknown, a lease reported lost, the nodes that Close releases. An ephemeral node
// lives as long as its session, so a node left behind by a live session would block
// the key for good; the reaper therefore retries until the node is gone or its
// session has ended (ZooKeeper then deleted it), not for a fixed time: a quorum loss
// can last longer than the session timeout without ending the session (a new leader
// gives every session a full timeout from its election). It goes on after Close, and
// stops when the Session's connection is closed (the session is then over).

// Reaper pacing.
const (
	reapMinBackoff = 10 * time.Millisecond
	reapMaxBackoff = time.Second
)

// reap runs round until it reports done or the Session is closed, with backoff
// between rounds.
func (l *Locker) reap(round func() (done bool, err error)) {
	backoff := reapMinBackoff
	for !l.sess.closed() {
		if done, _ := round(); done {
			return
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-l.sess.ended:
			t.Stop()
			return
		}
		backoff = min(2*backoff, reapMaxBackoff)
	}
}

// sessionOver reports whether the connection now has a session other than session
// (non-zero): then session has ended and ZooKeeper deleted its ephemeral nodes.
func (l *Locker) sessionOver(session int64) bool {
	return session != 0 && l.conn.State() == zk.StateHasSession && l.conn.SessionID() != session
}

// reapNode deletes the node at path. When session is not 0 the node is deleted only
// if that session owns it (a node's owner never changes).
func (l *Locker) reapNode(path string, session int64) {
	l.reap(func() (bool, error) {
		if l.sessionOver(session) {
			return true, nil
		}
		if session != 0 {
			ok, stat, err := l.conn.Exists(path)
			if err != nil {
				return !retriable(err), err
			}
			if !ok || stat.EphemeralOwner != session {
				return true, nil
			}
		}
		err := l.conn.Delete(path, -1)
		return err == nil || errors.Is(err, zk.ErrNoNode) || !retriable(err), err
	})
}

// reapByID deletes every child of keyPath with protected id: the nodes of an attempt
// whose creates may have been applied without its knowing.
func (l *Locker) reapByID(keyPath, id string) {
	l.reap(func() (bool, error) {
		if _, err := l.conn.Sync(keyPath); err != nil {
			return errors.Is(err, zk.ErrNoNode) || !retriable(err), err
		}
		children, _, err := l.conn.Children(keyPath)
		if err != nil {
			return errors.Is(err, zk.ErrNoNode) || !retriable(err), err
		}
		for _, name := range children {
			c, ok := parseContender(name)
			if !ok || c.id != id {
				continue
			}
			if err := l.conn.Delete(keyPath+"/"+name, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return !retriable(err), err
			}
		}
		return true, nil
	})
}

// reapAfter deletes the node at path of session (see reapNode) once expires has
// passed, in the background, and then calls then (if not nil): the node of a lease
// reported lost, or left held by Close, which must stay until the Expires its
// holder was given. l.mu may be held.
func (l *Locker) reapAfter(expires time.Time, path string, session int64, then func()) {
	l.bg(func() {
		if d := time.Until(expires); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-l.sess.ended:
			}
			t.Stop()
		}
		l.reapNode(path, session)
		if then != nil {
			then()
		}
	})
}
