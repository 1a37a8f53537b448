package zklock

import (
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
)

// A sub is a Lost subscription: one lease that someone watches.
type sub struct {
	ch      chan struct{} // closed when the lease is lost
	session int64
	node    string
	expires time.Time // the latest Expires of the lease
}

// closedChan is returned by Lost for a lease that is lost already.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// Lost returns a channel that is closed when lease is lost, or may be: when the
// session that holds its node ends (expired, closed), when the connection to
// ZooKeeper has been down for Options.DisconnectGrace (default: at once; a
// disconnected client cannot know whether its session survives, as Curator's
// SUSPENDED state), when the lease's Expires passes without a Renew, or when Close is
// called. A lease reported lost is dead: the Locker deletes its node in the background
// if it still exists (so that a session that survives does not keep the key locked
// with nobody using it), and Renew and Unlock of it return ErrNotHeld.
//
// Lost returns nil for a lease whose Token this package did not make. Call it with the
// Locker that acquired the lease. It checks once, in the background, that the lease's
// node exists (the channel closes at once for a lease that was already unlocked), then
// watches the session by polling the zk.Conn's state (every SessionTimeout/40, at most
// every 50ms, only while some lease is watched), and keeps nothing once the lease is
// unlocked, lost or expired.
func (l *Locker) Lost(lease distlock.Lease) <-chan struct{} {
	_, node, err := l.leaseNode("Lost", lease)
	if err != nil {
		return nil
	}
	sid := l.conn.SessionID() // checked against the node's owner below
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return closedChan
	}
	if _, dead := l.dead[lease.Token]; dead {
		return closedChan
	}
	if s := l.subs[lease.Token]; s != nil {
		if lease.Expires.After(s.expires) {
			s.expires = lease.Expires
		}
		return s.ch
	}
	s := &sub{ch: make(chan struct{}), session: sid, node: node, expires: lease.Expires}
	if !time.Now().Before(lease.Expires) {
		l.loseLocked(lease.Token, s)
		return s.ch
	}
	l.subs[lease.Token] = s
	if !l.monitoring {
		l.monitoring = l.spawnLocked(l.monitor)
	}
	// The lease may have been unlocked already, or belong to another session (an
	// ended one, or another client's): check once, in the background.
	l.spawnLocked(func() {
		exists, stat, err := l.conn.Exists(node)
		if err == nil && (!exists || stat.EphemeralOwner != sid || uint64(stat.Czxid) != lease.Fence) {
			l.mu.Lock()
			if l.subs[lease.Token] == s {
				close(s.ch)
				delete(l.subs, lease.Token)
			}
			l.mu.Unlock()
		}
	})
	return s.ch
}

// loseLocked closes s's channel, forgets s, and deletes its node in the background
// unless its session is over. l.mu is held.
func (l *Locker) loseLocked(token string, s *sub) {
	close(s.ch)
	delete(l.subs, token)
	if l.sessionOver(s.session) {
		return
	}
	l.dead[token] = struct{}{}
	if !l.spawnLocked(func() {
		l.reapNode(s.node, s.session)
		l.mu.Lock()
		delete(l.dead, token)
		l.mu.Unlock()
	}) {
		delete(l.dead, token)
	}
}

// dropSub closes and forgets the subscription of a lease that was unlocked or found
// not held.
func (l *Locker) dropSub(token string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.subs[token]; s != nil {
		close(s.ch)
		delete(l.subs, token)
	}
}

// extendSub records a renewed lease's Expires.
func (l *Locker) extendSub(token string, expires time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.subs[token]; s != nil && expires.After(s.expires) {
		s.expires = expires
	}
}

// pollInterval is how often the monitor looks at the connection's state.
func (l *Locker) pollInterval() time.Duration {
	return min(max(l.o.SessionTimeout/40, 5*time.Millisecond), 50*time.Millisecond)
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
		connected := state == zk.StateHasSession
		if connected {
			downSince = time.Time{}
		} else if downSince.IsZero() {
			downSince = now
		}
		suspended := !connected && now.Sub(downSince) >= l.o.DisconnectGrace
		l.mu.Lock()
		for tok, s := range l.subs {
			if sid != s.session || state == zk.StateExpired || suspended || !now.Before(s.expires) {
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
