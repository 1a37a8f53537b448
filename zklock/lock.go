package zklock

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync/atomic"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
)

// lock creates the attempt's lock node and decides with it: won when it has the
// lowest sequence number among the key's lock nodes, ErrLocked otherwise (its node
// deleted).
func (a *attempt) lock() (outcome, func()) {
	reapID := func() { a.l.reapByID(a.keyPath, a.id) }
	crowd := a.l.crowd(a.keyPath)
	early := a.listEarly(crowd)

	// 1. Create the node, or find it again after a lost reply.
	c, unknown, err := a.create()
	if err != nil {
		return a.fail(err), cleanupIf(unknown, reapID)
	}
	if c.known {
		crowd.Store(!c.alone)
	}
	if c.alone {
		return a.won(c.node, c.fence, c.owner, nil)
	}

	// 2. List the contenders, and read our node's stat (for the fence) in the same
	// round trip if the create did not tell it: go-zookeeper pipelines requests on
	// the connection. Our node was created after every lower one, so the server that
	// answers has seen them all.
	var statc <-chan statResult
	if !c.known {
		statc = a.l.existsAsync(c.node)
	}
	children, err := a.listChildren(early)
	if err != nil {
		return a.fail(err), reapID
	}
	own, mine, holder, ok := a.contenders(children)
	if !ok {
		// Our node is gone: the session expired after the create.
		return a.fail(fmt.Errorf("lock node %s vanished: the ZooKeeper session ended (%w)", c.node[len(a.keyPath)+1:], zk.ErrSessionExpired)), reapID
	}

	// 3. Lost: delete our node(s) and report the holder.
	if holder.id != a.id {
		return a.lose(own, holder)
	}
	// 4. Won.
	return a.win(c, statc, own, mine)
}

// listEarly sends the key's listing along with the create when the attempt expects
// company: a TryLock that follows its Wait, or of a key whose last attempt here
// found company (waiter nodes at least). An uncontended one sends none (nil): the
// create alone tells that it won. The listing is launched first but, on a
// goroutine, almost always queued after the create; listChildren uses it only if it
// shows our node (then the server answered it after the create).
func (a *attempt) listEarly(crowd *atomic.Bool) <-chan listing {
	if !a.pipeline && !crowd.Load() {
		return nil
	}
	early := make(chan listing, 1)
	go func() {
		children, _, err := a.l.conn.Children(a.keyPath)
		early <- listing{children, err}
	}()
	return early
}

// listChildren returns the key's children as a server that applied our create
// sees them: early's listing (see listEarly) if it shows our node, or a listing of
// its own.
func (a *attempt) listChildren(early <-chan listing) ([]string, error) {
	if early != nil {
		if r := <-early; r.err == nil && hasID(r.children, a.id) {
			return r.children, nil
		}
	}
	children, _, err := a.l.conn.Children(a.keyPath)
	return children, err
}

// contenders returns, among the key's children, the attempt's lock nodes (own:
// more than one when a create went again after a lost reply), the lowest of them
// (mine), and the lowest lock node of all (holder). ok is false when none is ours.
func (a *attempt) contenders(children []string) (own []contender, mine, holder contender, ok bool) {
	for _, name := range children {
		if c, isC := parseContender(name); isC && c.id == a.id {
			own = append(own, c)
		}
	}
	if len(own) == 0 {
		return nil, contender{}, contender{}, false
	}
	mine = slices.MinFunc(own, func(x, y contender) int { return cmp.Compare(x.seq, y.seq) })
	holder, _ = lowest(children)
	return own, mine, holder, true
}

// lose deletes the attempt's lock nodes (own), which queued behind holder, and
// reports the key held. A node whose delete failed is left to the cleanup.
func (a *attempt) lose(own []contender, holder contender) (o outcome, cleanup func()) {
	for _, c := range own {
		if err := a.l.conn.Delete(a.keyPath+"/"+c.name, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			cleanup = func() { a.l.reapByID(a.keyPath, a.id) }
		}
	}
	return a.fail(fmt.Errorf("held by lock node %s: %w", holder.name, distlock.ErrLocked)), cleanup
}

// win takes the lock with mine, the lowest lock node: it deletes the attempt's
// other nodes (own), which lost replies left, and takes mine's fence from the
// create (c) when it made mine and told it, or else from statc (an exists of
// c.node sent with the listing) or a read of its own.
func (a *attempt) win(c created, statc <-chan statResult, own []contender, mine contender) (outcome, func()) {
	l := a.l
	minePath := a.keyPath + "/" + mine.name
	cleanup := a.dropDuplicates(own, mine)
	if minePath == c.node && c.known {
		return a.won(minePath, c.fence, c.owner, cleanup)
	}
	var sr statResult
	if minePath == c.node {
		sr = <-statc
	}
	if minePath != c.node || sr.err != nil {
		sr.exists, sr.stat, sr.err = l.conn.Exists(minePath)
	}
	if sr.err != nil {
		return a.fail(sr.err), then(cleanup, func() { l.reapNode(minePath, 0) })
	}
	if !sr.exists {
		return a.fail(fmt.Errorf("lock node %s vanished: the ZooKeeper session ended (%w)", mine.name, zk.ErrSessionExpired)), cleanup
	}
	return a.won(minePath, sr.stat.Czxid, sr.stat.EphemeralOwner, cleanup)
}

// dropDuplicates deletes the attempt's lock nodes other than mine; cleanup, when
// not nil, deletes those that a delete left.
func (a *attempt) dropDuplicates(own []contender, mine contender) (cleanup func()) {
	var dups []string
	for _, c := range own {
		if c.name != mine.name {
			dups = append(dups, a.keyPath+"/"+c.name)
		}
	}
	for _, p := range dups {
		if err := a.l.conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			cleanup = func() {
				for _, p := range dups {
					a.l.reapNode(p, 0)
				}
			}
		}
	}
	return cleanup
}

// statResult is the answer to an exists.
type statResult struct {
	exists bool
	stat   *zk.Stat
	err    error
}

// existsAsync sends an exists of node on a goroutine, so that it shares a round
// trip with the request that the caller sends next (go-zookeeper pipelines the
// requests of a connection).
func (l *Locker) existsAsync(node string) <-chan statResult {
	c := make(chan statResult, 1)
	go func() {
		ok, stat, err := l.conn.Exists(node)
		c <- statResult{ok, stat, err}
	}()
	return c
}

// crowd returns the hint whether keyPath's last attempt found other children: one
// of a fixed set, shared by the keys whose paths hash alike (a wrong hint costs a
// request, or a round trip, never a wrong answer).
func (l *Locker) crowd(keyPath string) *atomic.Bool {
	h := fnv.New32a()
	h.Write([]byte(keyPath))
	return &l.crowded[h.Sum32()%uint32(len(l.crowded))]
}

// A listing is the answer to a getChildren.
type listing struct {
	children []string
	err      error
}

// hasID reports whether children holds a lock node with protected id.
func hasID(children []string, id string) bool {
	for _, name := range children {
		if c, ok := parseContender(name); ok && c.id == id {
			return true
		}
	}
	return false
}
