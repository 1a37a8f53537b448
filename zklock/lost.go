package zklock

import (
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
)

// A sub is a Lost subscription: one lease that someone watches.
type sub struct {
	ch      chan struct{} // closed when the lease is lost; nil until Lost asks for it
	fns     []*lossFunc   // AfterLost's functions, started when the lease is lost
	session int64         // the session that owns the node (its ephemeralOwner); 0 until read
	key     string        // the lease's Key: with its Token, it names the node (nodeOf)
	expires time.Time     // the latest Expires of the lease
	least   time.Duration // the smallest session timeout granted when expires was set
}

// owner returns the session whose node s watches, or, until that is read, the
// connection's current one: a node that is this client's belongs to it.
func (l *Locker) owner(s *sub) int64 {
	if s.session != 0 {
		return s.session
	}
	return l.conn.SessionID()
}

// closedChan returns a closed channel, for Lost of a lease that is lost already.
func closedChan() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}

// Lost returns a channel that is closed when lease is lost, or may be: when the
// session that holds its node ends (expired, closed), when the connection to
// ZooKeeper has been down for Options.DisconnectGrace (default: at once; a
// disconnected client cannot know whether its session survives, as Curator's
// SUSPENDED state), when a reconnection was granted a shorter session timeout than
// the one the lease's Expires was counted with (see Session), when the lease's
// Expires passes without a Renew, or when Close is called. A lease reported lost is
// dead: Renew and Unlock of it return ErrNotHeld, and the Locker deletes its node in
// the background if it still exists, once the lease's Expires has passed (so that a
// session that survives does not keep the key locked with nobody using it, and
// nobody else takes the key before the Expires that its holder was given).
//
// Lost returns nil for a lease whose Token this package did not make. Call it with the
// Locker that acquired the lease. For a lease that this Locker's TryLock did not
// return, or that was released since, it reads the lease's node in the background
// (again after a connection error), and closes the channel at once when the node is
// gone (the lease was unlocked) or does not belong to the connection's session (the
// session that took the lease ended); a lease that TryLock returned is known. Then it watches that session, the node's owner, by polling
// the zk.Conn's state (every 1/40 of the session timeout, at most every 50ms, only
// while some lease is watched), and keeps nothing once the lease is unlocked, lost or expired.
func (l *Locker) Lost(lease distlock.Lease) <-chan struct{} {
	if !validLease(lease) {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.subscribeLocked(lease)
	if s == nil {
		return closedChan()
	}
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// subscribeLocked returns the subscription that watches lease (validated by
// leaseNode), made if need be, or nil when the lease is lost already: the Locker is
// closed, the lease was reported lost, its Expires has passed, or the session was
// granted a shorter timeout since its Expires was set. l.mu is held.
func (l *Locker) subscribeLocked(lease distlock.Lease) *sub {
	if l.closed {
		return nil
	}
	if _, dead := l.dead[lease.Token]; dead {
		return nil
	}
	if s := l.subs[lease.Token]; s != nil {
		if lease.Expires.After(s.expires) {
			s.expires = lease.Expires
		}
		return s
	}
	s := &sub{key: lease.Key, expires: lease.Expires}
	h := l.held[lease.Token]
	if h != nil {
		s.least = h.least
		if h.fence == lease.Fence && h.expires.After(s.expires) {
			// lease is an older copy of one that Renew extended since: its
			// holder may count on the later Expires.
			s.expires = h.expires
		}
	} else {
		s.least, _ = l.sess.bounds()
	}
	if least, _ := l.sess.bounds(); !time.Now().Before(s.expires) || least < s.least {
		l.loseLocked(lease.Token, s)
		return nil
	}
	l.subs[lease.Token] = s
	if !l.monitoring {
		l.monitoring = l.spawnLocked(l.monitor)
	}
	if h != nil && h.key == lease.Key && h.fence == lease.Fence {
		// TryLock returned the lease and nothing released it since: its node is
		// the one that its acquisition created (the path names it), owned by
		// h.session, which the monitor watches from here on.
		s.session = h.session
		return s
	}
	// The lease may have been unlocked already, or belong to another session (an
	// ended one, or another client's): read the node in the background.
	l.spawnLocked(func() { l.readOwner(lease.Token, lease.Fence, s) })
	return s
}

// fire closes s's channel, if Lost made one, and starts its AfterLost functions,
// each in its own goroutine. l.mu is held.
func (s *sub) fire() {
	if s.ch != nil {
		close(s.ch)
	}
	for _, fn := range s.fns {
		go fn.f()
	}
	s.fns = nil
}

// readOwner reads the node of the Lost subscription s and records the session that
// owns it, or closes s's channel when the node is gone, is not the one that the
// lease's acquisition created, or belongs to a session other than the connection's
// (the session that took the lease ended, or the lease is another client's: either
// way there is nothing of this client's to delete). It retries connection errors
// until it has an answer, s is gone, or the Locker or the Session is closed.
func (l *Locker) readOwner(token string, fence uint64, s *sub) {
	backoff := reapMinBackoff
	for {
		exists, stat, err := l.conn.Exists(l.nodeOf(s.key, token))
		sid := l.conn.SessionID() // after the reply: a session that ended is replaced by then
		l.mu.Lock()
		if l.subs[token] != s {
			l.mu.Unlock()
			return // unlocked, lost or closed meanwhile
		}
		if err == nil {
			if !exists || uint64(stat.Czxid) != fence || stat.EphemeralOwner != sid {
				s.fire()
				delete(l.subs, token)
				l.failRenewsLocked(token)
			} else {
				s.session = stat.EphemeralOwner
			}
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		if !retriable(err) {
			return // the monitor and Expires still watch the lease
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-l.done:
			t.Stop()
			return
		case <-l.sess.ended:
			t.Stop()
			return
		}
		backoff = min(2*backoff, reapMaxBackoff)
	}
}

// loseLocked closes s's channel, forgets s, and deletes its node in the background
// unless its session is over. The node stays until the lease's Expires (or Close):
// the holder was told of the loss, but a holder that did not look may still count on
// its Expires, so the key must not be free for another before it. l.mu is held.
func (l *Locker) loseLocked(token string, s *sub) {
	s.fire()
	delete(l.subs, token)
	delete(l.held, token)
	l.failRenewsLocked(token)
	owner := l.owner(s)
	if l.sessionOver(owner) {
		return
	}
	l.dead[token] = struct{}{}
	l.reapAfter(s.expires, l.nodeOf(s.key, token), owner, func() {
		l.mu.Lock()
		delete(l.dead, token)
		l.mu.Unlock()
	})
}

// pollInterval is how often the monitor looks at the connection's state.
func (l *Locker) pollInterval() time.Duration {
	return min(max(l.sess.Timeout()/40, 5*time.Millisecond), 50*time.Millisecond)
}

// monitor watches the session for the Lost subscriptions; it exits when there are
// none left or the Locker is closed.
func (l *Locker) monitor() {
	t := time.NewTicker(l.pollInterval())
	defer t.Stop()
	var downSince time.Time
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
		}
		state, sid, now := l.conn.State(), l.conn.SessionID(), time.Now()
		least, _ := l.sess.bounds()
		connected := state == zk.StateHasSession
		if connected {
			downSince = time.Time{}
		} else if downSince.IsZero() {
			downSince = now
		}
		suspended := !connected && now.Sub(downSince) >= l.o.DisconnectGrace
		l.mu.Lock()
		for tok, s := range l.subs {
			if s.session != 0 && sid != s.session || state == zk.StateExpired || suspended || !now.Before(s.expires) || least < s.least {
				l.loseLocked(tok, s)
			}
		}
		if len(l.subs) == 0 {
			l.monitoring = false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
	}
}
