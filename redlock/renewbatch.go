package redlock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/internal/redisx"
)

// The Renews of a Locker go out in batches: while one batch is in flight, the
// Renews that come wait, and the next batch takes them (the oldest maxRenewBatch)
// in one fan-out, one call per node (a pipeline of renewManyScript calls of up to
// 256 leases each, internal/redisx's Node.RenewMany). A lone Renew is a batch of
// one, sent on its caller's goroutine with its caller's context; a later batch runs
// on a goroutine of l.group, which sends the next one, and the next, until none
// waits.
//
// So what a renewal in flight costs does not grow with the leases renewed at once:
// one fan-out (five goroutines and five calls) per batch, not per renewal, and a
// waiting Renew is its caller's goroutine and a small record. A node that answers
// no batch in time leaves one call per batch behind it, not one per renewal; a
// Renew whose context ends while it waits returns at once and is not sent (unless
// its batch was taken already); and a Renew that failed (Hold tries again soon)
// returns only once its batch's fan-out has ended, so its retry never waits in the
// line beside it: a master that is slow gets at most one batch call at a time from
// the line, plus those that it has not answered yet.

// maxRenewBatch bounds the Renews of one batch (four renewManyScript calls per
// node): the renewals that waited while the masters were slow go out in several
// batches, oldest first, each small enough for a loaded master to answer within the
// node timeout, rather than in one that takes it longer, fails as a whole, and comes
// back as large with the retries.
const maxRenewBatch = 4 * redisx.RenewManyMax

// renewals is the line of a Locker's Renews.
type renewals struct {
	mu      sync.Mutex
	busy    bool       // a batch is in flight
	pending []*renewal // the Renews that wait, oldest first
}

// A renewal is one Renew in the line.
type renewal struct {
	lock  string // the lock's Redis name
	token string
	ms    int64         // ttl in ms
	nt    time.Duration // the per-node timeout of its ttl
	ctx   context.Context
	res   []reply[bool] // the nodes' answers, set before done is signalled
	done  chan struct{} // capacity 1
	state atomic.Int32  // pending, delivered (res is set), abandoned (its caller left)
}

// renewOn renews r's lock on every node: at once when no batch is in flight, or in
// the next batch. It returns one reply per node, as fanout does; when ctx ends
// before r's batch answers, each reply's error wraps errNoReply and ctx's error.
func (l *Locker) renewOn(ctx context.Context, r *renewal) []reply[bool] {
	if !l.uses(useRenewBatch) {
		return l.renewBatch(ctx, []*renewal{r})[0]
	}
	rs := &l.renewals
	rs.mu.Lock()
	if !rs.busy {
		rs.busy = true
		rs.mu.Unlock()
		res := l.renewBatch(ctx, []*renewal{r})[0]
		l.renewNext()
		return res
	}
	r.ctx, r.done = ctx, make(chan struct{}, 1)
	rs.pending = append(rs.pending, r)
	rs.mu.Unlock()
	select {
	case <-r.done:
	case <-ctx.Done():
		if r.state.CompareAndSwap(pending, abandoned) {
			// Still in the line (taken, it is sent all the same: harmless).
			res := make([]reply[bool], len(l.nodes))
			for i := range res {
				res[i] = reply[bool]{ran: true, err: fmt.Errorf("%w: %w", errNoReply, ctx.Err())}
			}
			return res
		}
		<-r.done // delivered just now
	}
	return r.res
}

// renewNext ends a batch: the Renews that wait go out as the next batch, on a
// goroutine of l.group, or the line is idle. Call it during a call of l.
func (l *Locker) renewNext() {
	if batch := l.renewals.take(); batch != nil {
		l.group.Go(func() { l.drainRenewals(batch) })
	}
}

// take returns the next batch: the oldest maxRenewBatch of the Renews that wait and
// are still waited for; or nil, and then it marks the line idle.
func (rs *renewals) take() []*renewal {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var batch []*renewal
	k := 0
	for ; k < len(rs.pending) && len(batch) < maxRenewBatch; k++ {
		if r := rs.pending[k]; r.state.Load() == pending {
			batch = append(batch, r)
		}
	}
	if k == len(rs.pending) {
		rs.pending = nil
	} else {
		rest := make([]*renewal, len(rs.pending)-k)
		copy(rest, rs.pending[k:])
		rs.pending = rest
	}
	if len(batch) == 0 {
		rs.busy = false
		return nil
	}
	return batch
}

// drainRenewals sends batch, hands each Renew its answers, and goes on with the
// next batch until none waits.
func (l *Locker) drainRenewals(batch []*renewal) {
	for batch != nil {
		// The batch is no one caller's: it goes with the first one's context values
		// but not its cancellation.
		res := l.renewBatch(context.WithoutCancel(batch[0].ctx), batch)
		for j, r := range batch {
			r.res = res[j]
			if r.state.CompareAndSwap(pending, delivered) {
				r.done <- struct{}{}
			}
		}
		batch = l.renewals.take()
	}
}

// renewBatch renews the locks of batch on every node, one call per node, and
// returns each renewal's replies, by node. Each node gets the shortest per-node
// timeout of the batch; the fan-out ends early once every renewal's outcome is
// decided (decidedBatch), lingering for the slower nodes (see fanout), so that
// each Renew learns each node's answer where it comes in time.
func (l *Locker) renewBatch(ctx context.Context, batch []*renewal) [][]reply[bool] {
	keys := make([]string, len(batch))
	args := make([]any, 0, 2*len(batch))
	nt := batch[0].nt
	for j, r := range batch {
		keys[j] = r.lock
		args = append(args, r.token, l.nodes[0].MillisArg(r.ms))
		nt = min(nt, r.nt)
	}
	res := fanout(ctx, l, nil, nt, func(ctx context.Context, i int) ([]bool, error) {
		return l.nodes[i].RenewMany(ctx, keys, args)
	}, nil, func(res []reply[[]bool]) bool {
		return l.decidedBatch(res, len(batch))
	}, true)
	out := make([][]reply[bool], len(batch))
	flat := make([]reply[bool], len(batch)*len(l.nodes))
	for j := range batch {
		rj := flat[j*len(l.nodes) : (j+1)*len(l.nodes)]
		for i, r := range res {
			rj[i] = reply[bool]{err: r.err, ran: r.ran, answered: r.answered, suspect: r.suspect}
			if r.err == nil && r.answered && j < len(r.v) {
				rj[i].v = r.v[j]
			}
		}
		out[j] = rj
	}
	return out
}

// decidedBatch is the enough of a batch's fan-out: it reports whether the answers
// so far decide the outcome of every one of the batch's leases renewals, as
// decidedBool decides one Renew's.
func (l *Locker) decidedBatch(res []reply[[]bool], leases int) bool {
	q, n := l.quorum, len(l.nodes)
	failed := 0
	for _, r := range res {
		if r.err != nil {
			failed++
		}
	}
	if failed > n-q {
		return true
	}
	for j := range leases {
		yes, no := 0, 0
		for _, r := range res {
			switch {
			case r.err != nil || !r.answered:
			case r.v[j]:
				yes++
			default:
				no++
			}
		}
		if yes < q && no <= n-q {
			return false
		}
	}
	return true
}
