package zklock

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/driver"
)

// A preLock is the lock node that the head of a key's waiter queue makes while it
// waits (see queue): a contender, queued behind the holder like a zk.Lock waiter's,
// that holds the lock once the contenders before it are gone. The TryLock that claims
// the Wait's waiter node takes it over without a request.
type preLock struct {
	id    string // its protected id
	node  string // its path
	fence int64  // its czxid
	owner int64  // its session
	start time.Time
}

// contend creates the head waiter's lock node, as TryLock's multi does (the key
// node's setData tells the fence), and records start, taken before the request: a
// lease taken over from it counts its Expires from there (see claimPre).
func (l *Locker) contend(keyPath string) (*preLock, error) {
	p := &preLock{id: driver.NewToken(), start: time.Now()}
	sid := l.conn.SessionID()
	rs, err := l.conn.Multi(
		&zk.CreateRequest{Path: lockNodePrefix(keyPath, p.id), Data: l.data, Acl: l.o.ACL, Flags: zk.FlagEphemeralSequential},
		&zk.SetDataRequest{Path: keyPath, Version: -1},
	)
	switch {
	case connBroke(err):
		l.reapByID(keyPath, p.id) // it may have been applied
		return nil, err
	case err != nil:
		return nil, err
	case len(rs) != 2 || rs[0].String == "" || rs[1].Stat == nil || sid == 0 || l.conn.SessionID() != sid:
		if len(rs) > 0 && rs[0].String != "" {
			l.reapNode(rs[0].String, 0)
		}
		return nil, fmt.Errorf("the head waiter's lock node: unexpected answer %+v, or the session changed", rs)
	}
	p.node, p.fence, p.owner = rs[0].String, rs[1].Stat.Mzxid, sid
	return p, nil
}

// claimPre is an attempt that claimed a Wait whose head waiter's lock node, p,
// holds the lock: the lease is p's, with Expires capped at p.start + the validity
// (claimGrant), if the Wait was short enough that half the validity is left;
// otherwise it proves the session afresh (confirm: a write), after the core's
// start, so that the core's Expires stands.
func (a *attempt) claimPre(p *preLock) (o outcome, cleanup func()) {
	l := a.l
	a.id = p.id
	valid, _ := l.validity(a.ttl)
	capped := p.start.Add(valid)
	if time.Until(capped) < valid/2 {
		capped = time.Time{}
		stat, err := l.confirm(p.node)
		switch {
		case err != nil:
			return a.fail(err), func() { l.reapNode(p.node, p.owner) }
		case stat.Czxid != p.fence || stat.EphemeralOwner != p.owner:
			return a.fail(fmt.Errorf("the waiter's lock node %s changed hands (%w)", p.node, zk.ErrSessionExpired)), nil
		}
	}
	o, cleanup = a.won(p.node, p.fence, p.owner, nil)
	o.grant.capped = capped
	return o, cleanup
}

// below returns the contenders among children with a lower sequence number than the
// lock node mine, and false when mine is not among children.
func below(children []string, mine string) (lower []string, ok bool) {
	me, _ := parseContender(mine)
	for _, name := range children {
		if name == mine {
			ok = true
		} else if c, isC := parseContender(name); isC && c.seq < me.seq {
			lower = append(lower, name)
		}
	}
	return lower, ok
}

// What awaitLower saw.
const (
	lowerGone   = iota // every lower contender is gone: ours is the lowest
	lowerRelist        // something else changed: list again
	lowerLost          // a watch ended with the session or the connection
)

// awaitLower watches the contenders lower (named in keyPath) until they are all
// gone. A lock node made after ours has a higher sequence number, so once these are
// gone ours is the lowest, and the waiter knows it from the watch events alone,
// without a listing. Only the first preWaiters waiters watch this way, so a release
// still wakes O(1) clients.
func (l *Locker) awaitLower(abandon <-chan struct{}, keyPath string, lower []string) (int, error) {
	type fired struct {
		name string
		ev   zk.Event
	}
	events := make(chan fired, len(lower))
	stop := make(chan struct{})
	defer close(stop)
	left := 0
	for _, name := range lower {
		// GetW on a node that is already gone sets no watch: it is gone.
		_, _, watch, err := l.conn.GetW(keyPath + "/" + name)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return lowerRelist, err
		}
		left++
		go func() {
			select {
			case ev := <-watch:
				events <- fired{name, ev}
			case <-stop:
			}
		}()
	}
	for left > 0 {
		select {
		case f := <-events:
			switch f.ev.Type {
			case zk.EventNodeDeleted:
				left--
			case zk.EventNotWatching:
				return lowerLost, nil
			default:
				return lowerRelist, nil
			}
		case <-abandon:
			return lowerRelist, errAbandoned
		}
	}
	return lowerGone, nil
}
