package zklock

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
)

// Renewals of many leases share round trips and transactions: the version checks
// that concurrent Renews of one Locker send are gathered into one multi request,
// committed as one transaction. A multi either commits all its checks or fails
// at the first that fails, and ZooKeeper tells which one that is (the ops after
// it answer "runtime inconsistency"): that check's lease gets its error, and the
// others go again in the next multi, so every lease's answer is exactly that of
// a check of its own.
const (
	// maxCheckBatch bounds the checks of one multi, and maxCheckBytes their paths'
	// size (ZooKeeper's jute.maxbuffer is 1 MiB by default).
	maxCheckBatch = 1000
	maxCheckBytes = 256 << 10
	// maxCheckFlights bounds the multis of checks in flight at once: the checks
	// that come meanwhile queue up for the next one (group commit), so a Locker
	// that renews many leases sends few, large multis, and one that renews a few
	// sends each check at once.
	maxCheckFlights = 2
)

// A checkReq is one Renew's check, queued for a multi.
type checkReq struct {
	node string
	done chan error // buffered: the answer, nil when the node exists
}

// checks is the queue of checks waiting for a multi.
type checks struct {
	mu      sync.Mutex
	queue   []*checkReq
	flights int // goroutines sending multis
}

// check proves, through the leader, that node exists: it queues a version check
// of node for the next multi of checks and waits for its answer, until ctx ends or
// the Locker is closed. It returns zk.ErrNoNode when the node is gone.
func (l *Locker) check(ctx context.Context, node string) error {
	r := &checkReq{node: node, done: make(chan error, 1)}
	c := &l.checks
	c.mu.Lock()
	c.queue = append(c.queue, r)
	fly := c.flights < maxCheckFlights || l.checkEach
	if fly {
		c.flights++
	}
	c.mu.Unlock()
	if fly && !l.spawn(l.sendChecks) {
		c.mu.Lock()
		c.flights--
		c.mu.Unlock()
		return distlock.ErrClosed
	}
	var stop error
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		stop = ctx.Err()
	case <-l.done:
		stop = distlock.ErrClosed
	}
	select {
	case err := <-r.done:
		return err
	default:
		return stop
	}
}

// sendChecks sends the queued checks in multis until the queue is empty.
func (l *Locker) sendChecks() {
	c := &l.checks
	for {
		c.mu.Lock()
		n, size, most := 0, 0, maxCheckBatch
		if l.checkEach {
			most = 1
		}
		for n < len(c.queue) && n < most && (n == 0 || size+len(c.queue[n].node) <= maxCheckBytes) {
			size += len(c.queue[n].node)
			n++
		}
		if n == 0 {
			c.queue = nil
			c.flights--
			c.mu.Unlock()
			return
		}
		batch := make([]*checkReq, n)
		copy(batch, c.queue)
		c.queue = append(c.queue[:0:0], c.queue[n:]...)
		c.mu.Unlock()
		l.multiCheck(batch)
	}
}

// multiCheck sends the checks of batch in one multi. When one fails, it fails the
// multi and leaves the others unknown: that one gets its answer, and the rest go
// again in two halves at once (k failed checks among n take O(k log n) requests in
// O(log n) round trips, not k round trips), until every check has its answer.
func (l *Locker) multiCheck(batch []*checkReq) {
	ops := make([]any, len(batch))
	for i, r := range batch {
		ops[i] = &zk.CheckVersionRequest{Path: r.node, Version: -1}
	}
	res, err := l.conn.Multi(ops...)
	if len(res) != len(batch) {
		if err == nil {
			err = fmt.Errorf("a multi of %d checks had %d answers", len(batch), len(res))
		}
		for _, r := range batch {
			r.done <- err
		}
		return
	}
	failed := -1
	for i, x := range res {
		if x.Error != nil {
			failed = i
			break
		}
	}
	if failed < 0 {
		for _, r := range batch {
			r.done <- nil
		}
		return
	}
	batch[failed].done <- res[failed].Error
	rest := append(batch[:failed:failed], batch[failed+1:]...)
	if len(rest) == 0 {
		return
	}
	half := len(rest) / 2
	var wg sync.WaitGroup
	if half > 0 {
		wg.Go(func() { l.multiCheck(rest[:half]) })
	}
	l.multiCheck(rest[half:])
	wg.Wait()
}
