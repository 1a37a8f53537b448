package redisx

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// RunShared and its queue: the calls of a Node that arrive while sharedSlots (8) of
// its calls (or batches of them) are in flight wait in a queue, and when one of those
// ends, all that wait go out together, as one pipeline: one write and one read in
// the client, one read and one write in the server, however many scripts the batch
// holds.
//
// A call that finds a slot free is a plain call (Run): a lone caller waits for no
// one and pays nothing but a lock. A caller whose context ends while it waits in the
// queue leaves it (its script is never sent); one whose script is in flight returns
// ctx's error, and its late result is dropped (see Call). Calls
// that wait longer than SharedStall for a slot go alone, so a hung connection holds
// up only the calls it carries.
//
// A batch runs on one of the Node's Group's workers (SetGroup), which then sends the
// next batch, and the next, until the queue is empty: the callers only wait. A Node
// without a Group does not share: its RunShared calls are plain calls.

// sharedSlots is how many calls or batches of a Node may be in flight at once; the
// calls that come meanwhile wait in its queue. Up to sharedSlots concurrent callers
// never wait for one another; beyond that, each batch shares one round trip.
// Node.SetSharedSlots changes it for a Node (tests).
const sharedSlots = 8

// SharedStall is how long RunShared calls wait for the call or batch in flight
// before they give up sharing and go alone: a connection that hangs (until the
// client's ReadTimeout) holds up only the calls it carries, not every later one.
const SharedStall = 500 * time.Millisecond

// A sharedQueue gathers the RunShared calls of a Node that wait for a slot.
type sharedQueue struct {
	mu       sync.Mutex
	slots    int       // calls or batches in flight at most: sharedSlots when 0
	inflight int       // calls or batches in flight
	since    time.Time // when the last of them was sent
	pending  []*sharedReq
	timer    *time.Timer // fires SharedStall after armed: the pending calls go alone
	armed    time.Time   // when pending's first call came
}

// The states of a sharedReq.
const (
	reqQueued    = iota // in pending
	reqSent             // in a batch in flight
	reqDone             // v and err are set, wake signalled
	reqAbandoned        // its caller returned while it was in flight
	reqAlone            // stalled: its caller is to go alone (wake signalled)
)

// A sharedReq is one RunShared call that waits in the queue.
type sharedReq struct {
	ctx   context.Context
	s     *redis.Script
	keys  []string
	args  []any
	keep  bool // sent even when its caller leaves while it waits (ReleaseShared)
	gone  bool // its caller left while it waited, and keep: no one waits for it
	v     any
	err   error
	state atomic.Int32
	wake  chan struct{} // capacity 1
}

var reqPool = sync.Pool{New: func() any { return &sharedReq{wake: make(chan struct{}, 1)} }}

// putReq returns r to the pool: only when no one else refers to it (its wake was
// received, or it left the queue before it was sent).
func putReq(r *sharedReq) {
	*r = sharedReq{wake: r.wake}
	reqPool.Put(r)
}

// SetSharedSlots sets how many RunShared calls or batches of n may be in flight
// at once before the next calls queue (sharedSlots by default), for tests that
// need the queue to form behind one call. Call it before n is used.
func (n *Node) SetSharedSlots(k int) { n.shared.slots = k }

// SetGroup gives n the Group whose workers run its shared calls; without one,
// RunShared is a plain call. Call it before n is used.
func (n *Node) SetGroup(g *Group) { n.group = g }

// RenewShared is Renew through RunShared, for callers that renew many leases at
// once (distlock.Hold with many leases).
func (n *Node) RenewShared(ctx context.Context, lock, token string, ms int64) (bool, error) {
	v, err := n.RunShared(ctx, renewScript, []string{lock}, token, n.MillisArg(ms))
	i, _ := v.(int64)
	return i == 1 && err == nil, err
}

// ReleaseShared is Release through RunShared, except that a release whose caller
// leaves while it waits in the queue is still sent (as one whose caller leaves
// while it is in flight still completes): the lock goes as soon as it can.
func (n *Node) ReleaseShared(ctx context.Context, k Names, token string) (bool, error) {
	v, err := n.runShared(ctx, true, unlockScript, []string{k.Lock}, token, k.Channel)
	i, _ := v.(int64)
	return i == 1 && err == nil, err
}

// SharedPending reports how many RunShared calls wait in n's queue, for tests.
func (n *Node) SharedPending() int {
	q := &n.shared
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}

// RunShared runs script s as Run does, but shares round trips with the node's other
// RunShared calls: while sharedSlots calls or batches are in flight, the calls that
// come wait, and the next batch takes all of them in one pipeline. Each call gets
// its own reply; the batch goes with the first one's context values but without its
// cancellation (the others' scripts must not fail because one caller gave up). A
// call that finds a slot free is a plain Run.
//
// With a context that can end, RunShared returns ctx's error as soon as ctx is done:
// a call still in the queue leaves it unsent; a call in flight leaves its result to
// no one (see Call).
// Call it during a call of the Node's Group (SetGroup). Without a Group, RunShared
// is Run.
func (n *Node) RunShared(ctx context.Context, s *redis.Script, keys []string, args ...any) (any, error) {
	return n.runShared(ctx, false, s, keys, args...)
}

// runShared is RunShared; keep tells whether a call whose caller leaves while it
// waits in the queue is sent all the same (its result then goes to no one).
func (n *Node) runShared(ctx context.Context, keep bool, s *redis.Script, keys []string, args ...any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n.group == nil {
		return n.Run(ctx, s, keys, args...).Result()
	}
	q := &n.shared
	q.mu.Lock()
	if q.inflight < cmp.Or(q.slots, sharedSlots) {
		q.inflight++
		q.since = time.Now()
		q.mu.Unlock()
		return n.runLone(ctx, s, keys, args, true)
	}
	now := time.Now()
	if now.Sub(q.since) > SharedStall {
		q.mu.Unlock()
		return n.runLone(ctx, s, keys, args, false)
	}
	r := reqPool.Get().(*sharedReq)
	r.ctx, r.s, r.keys, r.args, r.keep = ctx, s, keys, args, keep
	q.pending = append(q.pending, r)
	if len(q.pending) == 1 {
		q.armed = now
		if q.timer == nil {
			q.timer = time.AfterFunc(SharedStall, n.stalled)
		} else {
			q.timer.Reset(SharedStall)
		}
	}
	q.mu.Unlock()
	return n.await(ctx, r)
}

// runLone runs one call on its own: a plain Run, on the caller's goroutine when
// n's Group runs ctx's requests inline (Group.Inline), else on a worker of the
// Group while the caller returns when ctx ends. slot tells that the call holds a slot, which it passes on when it ends
// (doneShared).
func (n *Node) runLone(ctx context.Context, s *redis.Script, keys []string, args []any, slot bool) (any, error) {
	if n.group.Inline(ctx) {
		v, err := n.Run(ctx, s, keys, args...).Result()
		if slot {
			n.doneShared()
		}
		return v, err
	}
	// callRun, not Call: it runs f even if ctx is done by now, so the slot is freed.
	return callRun(ctx, n.group, func() (any, error) {
		v, err := n.Run(ctx, s, keys, args...).Result()
		if slot {
			n.doneShared()
		}
		return v, err
	})
}

// await waits for r's turn and returns its result (see RunShared).
func (n *Node) await(ctx context.Context, r *sharedReq) (any, error) {
	select {
	case <-r.wake:
	case <-ctx.Done():
		q := &n.shared
		q.mu.Lock()
		if r.state.Load() == reqQueued { // not sent: leave the queue, or leave it behind
			if r.keep {
				r.gone = true // take marks it abandoned
				q.mu.Unlock()
				return nil, ctx.Err()
			}
			if i := slices.Index(q.pending, r); i >= 0 {
				q.pending = slices.Delete(q.pending, i, i+1)
			}
			q.mu.Unlock()
			putReq(r)
			return nil, ctx.Err()
		}
		q.mu.Unlock()
		if r.state.CompareAndSwap(reqSent, reqAbandoned) {
			return nil, ctx.Err() // the batch's sender drops r's result
		}
		<-r.wake // done or alone just now
	}
	if r.state.Load() == reqAlone {
		ctx, s, keys, args := r.ctx, r.s, r.keys, r.args
		putReq(r)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return n.runLone(ctx, s, keys, args, false)
	}
	v, err := r.v, r.err
	putReq(r)
	return v, err
}

// deliver hands r its result: it wakes r's caller, or drops the result when the
// caller has gone. r is not touched after.
func (r *sharedReq) deliver() {
	if r.state.CompareAndSwap(reqSent, reqDone) {
		r.wake <- struct{}{}
	}
}

// take takes the pending calls as the next batch, which holds the slot of the call
// or batch that just ended. Call it with q.mu held.
func (q *sharedQueue) take() []*sharedReq {
	batch := q.pending
	q.pending = nil
	q.since = time.Now()
	q.timer.Stop()
	for _, r := range batch {
		if r.gone {
			r.state.Store(reqAbandoned)
		} else {
			r.state.Store(reqSent)
		}
	}
	return batch
}

// doneShared ends a call or batch in flight: its slot goes to the calls that wait,
// as the next batch, or is freed.
func (n *Node) doneShared() {
	q := &n.shared
	q.mu.Lock()
	if len(q.pending) == 0 {
		q.inflight--
		q.mu.Unlock()
		return
	}
	batch := q.take()
	q.mu.Unlock()
	n.group.run(funcJob(func() { n.drain(batch) }))
}

// drain sends batch and each batch that has gathered meanwhile, until none has; then
// it frees its slot. It runs on a worker of n's Group.
func (n *Node) drain(batch []*sharedReq) {
	q := &n.shared
	for {
		n.runBatch(context.WithoutCancel(batch[0].ctx), batch)
		for _, r := range batch {
			r.deliver()
		}
		q.mu.Lock()
		if len(q.pending) == 0 {
			q.inflight--
			q.mu.Unlock()
			return
		}
		batch = q.take()
		q.mu.Unlock()
	}
}

// stalled runs SharedStall after the first of the pending calls came: if they still
// wait, the call or batch in flight hangs, and each of them goes alone.
func (n *Node) stalled() {
	q := &n.shared
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) == 0 || time.Since(q.armed) < SharedStall {
		return // taken, or a later batch's (its own timer runs)
	}
	// The calls whose callers left stay for the next batch.
	gone := q.pending[:0]
	for _, r := range q.pending {
		if r.gone {
			gone = append(gone, r)
			continue
		}
		r.state.Store(reqAlone)
		r.wake <- struct{}{}
	}
	clear(q.pending[len(gone):])
	q.pending = gone
}
