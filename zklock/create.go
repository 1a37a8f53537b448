package zklock

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"
)

// A created lock node, and what its create told about it.
type created struct {
	node string
	// known: fence and owner are the node's czxid and ephemeralOwner. The multi
	// that created the node tells both; a node found again after a lost reply, or
	// made by a plain create, needs a read.
	known        bool
	fence, owner int64
	// alone: the node was its key node's only child when it was created, so it has
	// the lowest sequence number of all: it holds the lock, without a listing.
	alone bool
}

// create makes the attempt's lock node (step 1 of lock), or finds it again after a
// lost reply. unknown reports that a create may have been applied without our knowing
// (the caller then removes nodes by id when it gives up).
//
// The node is created by one multi request that also sets the key node's data
// (empty, as it always is), and deletes the waiter node that the attempt claimed, if
// any (one write less, and the next waiter moves up as the lock node appears): the
// setData's answer is the key node's stat after the
// transaction, whose mzxid is the transaction's zxid — the new node's czxid, the
// Fence — and whose numChildren tells whether the new node is the only child. An
// uncontended TryLock thus takes one round trip, and its Unlock one more: two against
// zk.Lock's three (create, listing, delete). A key node that grants no write (another
// client made it with an ACL of its own) makes the multi fail with zk.ErrNoAuth: the
// attempt falls back to a plain create, whose fence the listing's round trip reads.
func (a *attempt) create() (c created, unknown bool, err error) {
	plain := false
	for creates := 0; ; {
		if plain {
			var path string
			if path, err = a.l.conn.Create(lockNodePrefix(a.keyPath, a.id), a.l.data, zk.FlagEphemeralSequential, a.l.o.ACL); err == nil {
				return created{node: path}, unknown, nil
			}
		} else {
			var again bool
			if c, again, err = a.createMulti(); err == nil {
				return c, unknown, nil
			}
			if again {
				continue
			}
			if errors.Is(err, zk.ErrNoAuth) {
				plain = true // the key node grants no write: see above
				continue
			}
		}
		switch {
		case errors.Is(err, zk.ErrNoNode):
			// The key's node (or Prefix) does not exist yet, or was just removed.
			if creates++; creates >= maxCreates {
				return c, unknown, err
			}
			if err = a.l.ensureKeyNode(a.keyPath); err == nil {
				continue
			}
			if retriable(err) {
				return c, unknown, retryable(err) // nothing of ours was made
			}
			return c, unknown, err
		case connBroke(err):
			// The request may have been applied: look for the node by its id.
			unknown = true
			found, ferr := a.l.findOwn(a.keyPath, a.id)
			if ferr == nil && found != "" {
				return created{node: found}, unknown, nil
			}
			if ferr != nil {
				err = ferr
			}
			return c, unknown, err
		case retriable(err):
			// Not sent, or the session expired (with it, any node it had): the core
			// may try again, with the same id.
			return c, unknown, retryable(err)
		}
		return c, unknown, err
	}
}

// createMulti sends the multi that creates the attempt's lock node (see create).
// again reports that the waiter node it was to delete is gone already: the
// multi may go again without it.
func (a *attempt) createMulti() (c created, again bool, err error) {
	l := a.l
	sid := l.conn.SessionID()
	ops := []any{
		&zk.CreateRequest{Path: lockNodePrefix(a.keyPath, a.id), Data: l.data, Acl: l.o.ACL, Flags: zk.FlagEphemeralSequential},
		&zk.SetDataRequest{Path: a.keyPath, Version: -1},
	}
	if a.waiter != "" {
		ops = append(ops, &zk.DeleteRequest{Path: a.waiter, Version: -1})
	}
	rs, err := l.conn.Multi(ops...)
	if err != nil {
		if a.waiter != "" && len(rs) == len(ops) && rs[0].Error == nil && errors.Is(rs[2].Error, zk.ErrNoNode) {
			a.waiter = "" // the waiter node is gone already: nothing to delete
			return c, true, err
		}
		return c, false, err
	}
	a.waiterGone = a.waiter != ""
	if len(rs) != len(ops) || rs[0].String == "" {
		return c, false, fmt.Errorf("unexpected answer to the lock node's multi: %+v", rs)
	}
	c.node = rs[0].String
	// The node's owner is the session the request went out in: the one read
	// before it, if it is still the connection's (ids never repeat).
	if st := rs[1].Stat; st != nil && sid != 0 && l.conn.SessionID() == sid {
		c.known, c.fence, c.owner = true, st.Mzxid, sid
		c.alone = st.NumChildren == 1
	}
	return c, false, nil
}

// findOwn returns the path of a child of keyPath with protected id, or "" when there
// is none. It syncs the server with the leader first, so that a create that reached
// the ensemble before the connection broke is seen.
func (l *Locker) findOwn(keyPath, id string) (string, error) {
	if _, err := l.conn.Sync(keyPath); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return "", err
	}
	children, _, err := l.conn.Children(keyPath)
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var best *contender
	for _, name := range children {
		if c, ok := parseContender(name); ok && c.id == id && (best == nil || c.seq < best.seq) {
			best = &c
		}
	}
	if best == nil {
		return "", nil
	}
	return keyPath + "/" + best.name, nil
}

// ensureKeyNode creates Prefix's components (persistent) and keyPath (a container
// node, which ZooKeeper deletes once it has had children and is empty again).
func (l *Locker) ensureKeyNode(keyPath string) error {
	create := func() error {
		_, err := l.conn.CreateContainer(keyPath, nil, zk.FlagContainer, l.o.ACL)
		if errors.Is(err, zk.ErrNodeExists) {
			return nil
		}
		return err
	}
	if l.prefixReady.Load() {
		err := create()
		if !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		l.prefixReady.Store(false) // someone removed Prefix
	}
	parts := strings.Split(l.o.Prefix[1:], "/")
	p := ""
	for _, c := range parts {
		p += "/" + c
		_, err := l.conn.Create(p, nil, zk.FlagPersistent, l.o.ACL)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	l.prefixReady.Store(true)
	return create()
}
