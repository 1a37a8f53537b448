package sqllock

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/sqllock/internal/calls"
)

// A BatchRenewer is a Dialect that can renew many rows in one statement. The
// Locker of such a Dialect runs the Renews that come while one of its batches is
// in flight as the next batch, so that many leases (distlock.Hold of thousands)
// share round trips: each Renew still gets its own row's result, and its Expires
// counts from before it was called.
type BatchRenewer interface {
	// RenewBatch is Dialect.Renew of rs[i] for ttls[i], for every i, in one
	// statement; no two of rs have the same Hash and Token. held[i] is Renew's
	// held for rs[i].
	RenewBatch(ctx context.Context, rs []Row, ttls []time.Duration) (held []bool, err error)
}

// maxRenewBatch bounds the rows of one batch.
const maxRenewBatch = 1000

// renewer runs the Renews of a Locker whose Dialect is a BatchRenewer in batches:
// one caller at a time leads a batch of the Renews queued meanwhile.
type renewer struct {
	d Dialect // a BatchRenewer

	mu      sync.Mutex
	queue   []*renewOp
	leading bool // a caller leads a batch, or has been told to
}

type renewOp struct {
	ctx  context.Context
	r    Row
	ttl  time.Duration
	held bool
	err  error         // set before done is closed
	done chan struct{} // closed once the batch has its result
	lead chan struct{} // receives when the caller is to lead the next batch
}

// renew renews r for ttl in the next batch.
func (b *renewer) renew(ctx context.Context, r Row, ttl time.Duration) (bool, error) {
	o := &renewOp{ctx: ctx, r: r, ttl: ttl, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, o)
	if !b.leading {
		b.leading = true
		o.lead <- struct{}{}
	}
	b.mu.Unlock()
	select {
	case <-o.done:
		return o.held, o.err
	case <-o.lead:
		b.run()
		<-o.done
		return o.held, o.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	i := slices.Index(b.queue, o)
	if i < 0 {
		return false, ctx.Err() // in a batch that another caller leads
	}
	b.queue = slices.Delete(b.queue, i, i+1)
	select {
	case <-o.lead:
		b.promote()
	default:
	}
	return false, ctx.Err()
}

// promote tells the first queued caller to lead, or ends the leading; b.mu is held.
func (b *renewer) promote() {
	if len(b.queue) == 0 {
		b.leading = false
		return
	}
	b.queue[0].lead <- struct{}{}
}

// run takes a batch from the queue (which holds the leader's own op, first: the
// leader is always the queue's head), runs it and hands the leading on. A Renew of
// the same lease as one already in the batch waits for the next. The statement's
// context ends when the contexts of all the batch's callers have ended.
func (b *renewer) run() {
	b.mu.Lock()
	batch, rest := calls.Batch(b.queue, maxRenewBatch, func(p, o *renewOp) bool {
		return bytes.Equal(p.r.Hash, o.r.Hash) && bytes.Equal(p.r.Token, o.r.Token)
	})
	b.queue = rest
	b.mu.Unlock()

	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
	var left atomic.Int64
	left.Store(int64(len(batch)))
	for _, o := range batch {
		stop := context.AfterFunc(o.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	rs := make([]Row, len(batch))
	ttls := make([]time.Duration, len(batch))
	for i, o := range batch {
		rs[i], ttls[i] = o.r, o.ttl
	}
	var held []bool
	var err error
	if len(batch) == 1 { // the plain statement
		var h bool
		h, err = b.d.Renew(ctx, rs[0], ttls[0])
		held = []bool{h}
	} else {
		held, err = b.d.(BatchRenewer).RenewBatch(ctx, rs, ttls)
	}
	if err == nil && len(held) != len(batch) {
		err = errors.New("sqllock: the dialect's RenewBatch returned a result per row that does not match")
	}
	cancel()
	for i, o := range batch {
		if err != nil {
			o.err = err
		} else {
			o.held = held[i]
		}
		close(o.done)
	}
	b.mu.Lock()
	b.promote()
	b.mu.Unlock()
}
