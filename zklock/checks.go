package zklock

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/driver"
)

// Renewals of many leases share round trips and transactions: the version checks
// that concurrent Renews of one Locker send are gathered by a driver.Batcher into
// one multi request, committed as one transaction. A multi either commits all its
// checks or fails at the first that fails, and ZooKeeper tells which one that is
// (the ops after it answer "runtime inconsistency"): that check's lease gets its
// error, and the others go again, so every lease's answer is exactly that of a
// check of its own.
const (
	// maxCheckBatch bounds the checks of one batch, and maxCheckBytes the paths'
	// size of one multi (ZooKeeper's jute.maxbuffer is 1 MiB by default).
	maxCheckBatch = 1000
	maxCheckBytes = 256 << 10
	// maxCheckFlights bounds the batches of checks in flight at once: the checks
	// that come meanwhile queue up for the next one (group commit), so a Locker
	// that renews many leases sends few, large multis, and one that renews a few
	// sends each check at once.
	maxCheckFlights = 2
)

// newChecks returns the Batcher of l's checks: each request is a lock node's path,
// each result nil when the node exists (zk.ErrNoNode when it is gone). With each,
// every check goes alone and at once (a measurement switch: SetCheckEach). Its
// goroutines are l's own: a multi takes no context, and Close does not wait for it.
func newChecks(l *Locker, each bool) *driver.Batcher[string, error] {
	o := driver.BatchOptions[string]{MaxInFlight: maxCheckFlights, MaxBatch: maxCheckBatch, Go: l.bg}
	if each {
		o.MaxInFlight, o.MaxBatch = 1<<30, 1
	}
	return driver.NewBatcher(func(_ context.Context, nodes []string) ([]error, error) {
		all := make([]error, len(nodes))
		var wg sync.WaitGroup
		for first := 0; first < len(nodes); {
			n, size := first+1, len(nodes[first])
			for n < len(nodes) && n-first < maxCheckBatch && size+len(nodes[n]) <= maxCheckBytes {
				size += len(nodes[n])
				n++
			}
			idx := make([]int, n-first)
			for i := range idx {
				idx[i] = first + i
			}
			if first = n; first == len(nodes) {
				l.multiCheck(nodes, idx, all) // the last multi: on this goroutine
			} else {
				wg.Go(func() { l.multiCheck(nodes, idx, all) })
			}
		}
		wg.Wait()
		return all, nil
	}, o)
}

// multiCheck sends the checks of nodes at the positions idx in one multi, and puts
// each answer in out at its position. When one fails, it fails the multi and leaves
// the others unknown: that one gets its answer, and the rest go again in two halves
// at once (k failed checks among n take O(k log n) requests in O(log n) round trips,
// not k round trips), until every check has its answer.
func (l *Locker) multiCheck(nodes []string, idx []int, out []error) {
	ops := make([]any, len(idx))
	for i, j := range idx {
		ops[i] = &zk.CheckVersionRequest{Path: nodes[j], Version: -1}
	}
	res, err := l.conn.Multi(ops...)
	if len(res) != len(idx) {
		if err == nil {
			err = fmt.Errorf("a multi of %d checks had %d answers", len(idx), len(res))
		}
		for _, j := range idx {
			out[j] = err
		}
		return
	}
	failed := slices.IndexFunc(res, func(r zk.MultiResponse) bool { return r.Error != nil })
	if failed < 0 {
		return // every answer is nil
	}
	out[idx[failed]] = res[failed].Error
	rest := slices.Delete(slices.Clone(idx), failed, failed+1)
	half := len(rest) / 2
	var wg sync.WaitGroup
	if half > 0 {
		wg.Go(func() { l.multiCheck(nodes, rest[:half], out) })
	}
	if len(rest) > half {
		l.multiCheck(nodes, rest[half:], out)
	}
	wg.Wait()
}
