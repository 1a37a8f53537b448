package zklock

import (
	"time"

	"github.com/go-zookeeper/zk"
)

// leaseBound is how long after a confirmation's start (see confirm) the session is
// certainly alive at whichever leader could expire it: the session timeout (least,
// the smallest one granted), minus go-zookeeper's ping interval (a third of the
// session timeout; most, the largest one granted, gives the longest) and the
// leader's ping interval (half a tick), by which the leader's news of the session
// may be older than start. The package doc ("How long a lease is held") gives the
// argument.
func leaseBound(least, most, tickTime time.Duration) time.Duration {
	return least - most/3 - tickTime/2
}

// validity is how long a lease is certainly held after a TryLock or Renew whose
// quorum write (the create, or confirm's check) was sent at start and succeeded:
// ttl, capped by leaseBound. least is the smallest session timeout granted so far,
// which the caller records with the lease (see Lost).
func (l *Locker) validity(ttl time.Duration) (v, least time.Duration) {
	least, most := l.sess.bounds()
	return min(ttl, leaseBound(least, most, l.o.TickTime)), least
}

// confirm proves, through the leader, that node still exists, and returns its stat.
// It commits a version check of node (a write that changes nothing and that fails
// with zk.ErrNoNode when the node is gone): a read would not do, because a server
// cut off from the leader answers reads from its own copy until it notices, and it
// does not extend the session at the leader. The stat (owner session, czxid, both
// fixed for the node's life) is read in the same round trip. It returns zk.ErrNoNode
// when the node is gone.
func (l *Locker) confirm(node string) (*zk.Stat, error) {
	statc := l.existsAsync(node)
	res, err := l.conn.Multi(&zk.CheckVersionRequest{Path: node, Version: -1})
	if err == nil && len(res) > 0 {
		err = res[0].Error
	}
	sr := <-statc
	switch {
	case err != nil:
		return nil, err
	case sr.err != nil:
		return nil, sr.err
	case !sr.exists:
		return nil, zk.ErrNoNode
	}
	return sr.stat, nil
}
