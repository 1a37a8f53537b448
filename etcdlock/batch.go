package etcdlock

import (
	"context"
	"errors"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A readBatch shares round trips among the linearizable reads of concurrent
// Renews: the reads queued while a batch is in flight go out together, as one
// read-only transaction of up to maxBatchReads Gets (etcd serves it as one
// linearizable read: its result reflects every write acknowledged before it was
// sent, each of the queued reads included, so a Renew still confirms its refresh on
// the word of the quorum). At most maxReadFlights batches are in flight at once.
type readBatch struct {
	mu      sync.Mutex
	queue   []*batchRead
	flights int
}

// A batchRead is one queued read of a key.
type batchRead struct {
	key  string
	done chan batchResult // buffered
}

type batchResult struct {
	resp *clientv3.GetResponse
	err  error
}

const (
	// maxBatchReads stays below etcd's default --max-txn-ops (128).
	maxBatchReads  = 100
	maxReadFlights = 4
)

// batchGet reads the key k linearizably, in a batch with the reads of other calls,
// within ctx (one attempt of call). It must be called during a call.
func (l *Locker) batchGet(ctx context.Context, k string) (*clientv3.GetResponse, error) {
	r := &batchRead{key: k, done: make(chan batchResult, 1)}
	b := &l.reads
	b.mu.Lock()
	b.queue = append(b.queue, r)
	start := b.flights < maxReadFlights
	if start {
		b.flights++
	}
	b.mu.Unlock()
	if start {
		l.spawn(l.flushReads)
	}
	select {
	case res := <-r.done:
		return res.resp, res.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// flushReads sends the queued reads in batches until the queue is empty.
func (l *Locker) flushReads() {
	b := &l.reads
	for {
		b.mu.Lock()
		n := min(len(b.queue), maxBatchReads)
		if n == 0 {
			b.flights--
			b.mu.Unlock()
			return
		}
		batch := b.queue[:n:n]
		b.queue = b.queue[n:]
		if len(b.queue) == 0 {
			b.queue = nil
		}
		b.mu.Unlock()
		l.sendReads(batch)
	}
}

// sendReads sends batch as one transaction and hands each read its result. A
// failed transaction fails every read of it (their calls try them again).
func (l *Locker) sendReads(batch []*batchRead) {
	ctx, cancel := l.background()
	defer cancel()
	ctx, cancelT := context.WithTimeout(clientv3.WithRequireLeader(ctx), l.o.RequestTimeout)
	defer cancelT()
	if len(batch) == 1 {
		resp, err := l.client.Get(ctx, batch[0].key)
		batch[0].done <- batchResult{resp: resp, err: err}
		return
	}
	ops := make([]clientv3.Op, len(batch))
	for i, r := range batch {
		ops[i] = clientv3.OpGet(r.key)
	}
	resp, err := l.client.Txn(ctx).Then(ops...).Commit()
	for i, r := range batch {
		if err != nil {
			r.done <- batchResult{err: err}
			continue
		}
		rr := resp.Responses[i].GetResponseRange()
		if rr == nil {
			r.done <- batchResult{err: errors.New("etcdlock: a batched read got no range response")}
			continue
		}
		r.done <- batchResult{resp: (*clientv3.GetResponse)(rr)}
	}
}
