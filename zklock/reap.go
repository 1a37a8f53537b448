package zklock

import (
	"errors"
	"time"

	"github.com/go-zookeeper/zk"
)

// Background removal of lock nodes that a call could not remove itself: the node of a
// TryLock whose caller gave up, a create whose reply was lost, an Unlock whose outcome
// is unknown, a lease reported lost. An ephemeral node lives as long as its session,
// so a node left behind by a live session would block the key for good; the reaper
// therefore retries until the node is gone or its session has ended (ZooKeeper then
// deleted it), not for a fixed time, and goes on after Close (which waits for it). It
// stops early when the zk.Conn was closed (its requests then fail at once and its
// state stays StateDisconnected; the session is over), or when Close gives up.

// Reaper pacing.
const (
	reapMinBackoff = 10 * time.Millisecond
	reapMaxBackoff = time.Second
	// reapClosedAfter is how many failed rounds in a row, with the connection in
	// StateDisconnected each time, make the reaper conclude that the zk.Conn was
	// closed. A conn that reconnects spends its time in StateConnecting instead.
	// After Close, when a closed zk.Conn is the likely reason, fewer will do.
	reapClosedAfter      = 5
	reapClosedAfterClose = 2
)

// reap runs round until it reports done, with backoff between rounds.
func (l *Locker) reap(round func() (done bool, err error)) {
	backoff := reapMinBackoff
	closedRounds := 0
	for !l.quitting() {
		done, err := round()
		if done {
			return
		}
		if errors.Is(err, zk.ErrConnectionClosed) && l.conn.State() == zk.StateDisconnected {
			closedRounds++
			if closedRounds >= reapClosedAfter || l.isClosed() && closedRounds >= reapClosedAfterClose {
				return
			}
		} else {
			closedRounds = 0
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-l.quit:
			t.Stop()
			return
		}
		backoff = min(2*backoff, reapMaxBackoff)
	}
}

// quitting reports whether Close gave up deleting nodes.
func (l *Locker) quitting() bool {
	select {
	case <-l.quit:
		return true
	default:
		return false
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
