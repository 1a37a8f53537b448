package zklock

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
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
	p := &preLock{id: distlock.NewToken(), start: time.Now()}
	sid := l.conn.SessionID()
	rs, err := l.conn.Multi(
		&zk.CreateRequest{Path: lockNodePrefix(keyPath, p.id), Data: l.data, Acl: l.o.ACL, Flags: zk.FlagEphemeralSequential},
		&zk.SetDataRequest{Path: keyPath, Version: -1},
	)
	switch {
	case errors.Is(err, zk.ErrConnectionClosed):
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

// claimPre is a TryLock that claimed a Wait whose head waiter's lock node, p, holds
// the lock: the lease is p's, with Expires = p.start + the validity, if the Wait was
// short enough that half the validity is left; otherwise it proves the session
// afresh (confirm: a write) and counts from before that.
func (a *attempt) claimPre(p *preLock) (o outcome, cleanup func()) {
	l := a.l
	a.id = p.id
	a.start = p.start
	valid, _ := l.validity(a.ttl)
	if time.Until(p.start.Add(valid)) < valid/2 {
		a.start = time.Now()
		stat, err := l.confirm(p.node)
		switch {
		case err != nil:
			return a.fail(err), func() { l.reapNode(p.node, p.owner) }
		case stat.Czxid != p.fence || stat.EphemeralOwner != p.owner:
			return a.fail(fmt.Errorf("the waiter's lock node %s changed hands (%w)", p.node, zk.ErrSessionExpired)), nil
		}
	}
	return a.won(p.node, p.fence, p.owner, nil)
}
