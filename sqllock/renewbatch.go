package sqllock

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
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

// maxRenewBatch bounds the rows of one batch; renewStall is how long a statement
// in flight holds up the Renews queued behind it.
const (
	maxRenewBatch = 1000
	renewStall    = 100 * time.Millisecond
)

// renewer runs the Renews of a Locker whose Dialect is a BatchRenewer in batches,
// one statement in flight at a time. A Renew that finds none in flight runs its
// own statement, on its own context, as it would alone. The Renews that come
// meanwhile queue; when the statement ends, the queue goes as the next batch, run
// by a goroutine of the Locker (which runs batch after batch while Renews queue)
// on a context that ends when every caller of the batch has given up. Every
// caller waits for its result or its own context, whichever comes first: a
// caller that gives up while its Renew is in flight gets its context's error (the
// outcome is unknown, which a Renew allows: it never shortens the row's expiry).
//
// A statement in flight for longer than stall (its row locked by a long
// transaction, a connection that went dead) stops counting: the Renews queued
// meanwhile go as the next batch without waiting for it, so that one stuck lease
// does not make the others of the Locker lapse.
type renewer struct {
	d     Dialect // a BatchRenewer
	g     *calls.Group
	stall time.Duration // renewStall

	mu    sync.Mutex
	queue []*renewOp
	busy  bool // a statement is in flight that has not been for stall
}

type renewOp struct {
	ctx  context.Context
	r    Row
	ttl  time.Duration
	b    *renewBatch // once it has left the queue (under mu)
	held bool
	err  error         // set before done is closed
	done chan struct{} // closed once the batch has its result
}

// A renewBatch is the Renews of one statement.
type renewBatch struct {
	ops    []*renewOp
	ctx    context.Context
	cancel context.CancelFunc
	left   int // callers still waiting for it (under mu)
}

// A renewSlot is a statement in flight.
type renewSlot struct {
	b     *renewer
	timer *time.Timer
	aged  bool // in flight for longer than stall: it no longer counts
	ended bool
}

// renew renews r for ttl, alone or in the next batch, and returns by ctx's end.
func (b *renewer) renew(ctx context.Context, r Row, ttl time.Duration) (bool, error) {
	b.mu.Lock()
	if !b.busy {
		s := b.take()
		b.mu.Unlock()
		held, err := b.d.Renew(ctx, r, ttl)
		b.mu.Lock()
		s.end()
		b.start()
		b.mu.Unlock()
		return held, err
	}
	o := &renewOp{ctx: ctx, r: r, ttl: ttl, done: make(chan struct{})}
	b.queue = append(b.queue, o)
	b.mu.Unlock()
	select {
	case <-o.done:
		return o.held, o.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if i := slices.Index(b.queue, o); i >= 0 {
		b.queue = slices.Delete(b.queue, i, i+1) // never sent
		return false, ctx.Err()
	}
	if o.b.left--; o.b.left == 0 {
		o.b.cancel()
	}
	return false, ctx.Err()
}

// take counts a new statement in flight; b.mu is held.
func (b *renewer) take() *renewSlot {
	b.busy = true
	s := &renewSlot{b: b}
	s.timer = time.AfterFunc(b.stall, s.age)
	return s
}

// age stops counting s, in flight for too long: the queue goes without it.
func (s *renewSlot) age() {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.ended {
		return
	}
	s.aged = true
	b.busy = false
	b.start()
}

// end stops counting s; b.mu is held.
func (s *renewSlot) end() {
	s.timer.Stop()
	s.ended = true
	if !s.aged {
		s.b.busy = false
	}
}

// start starts a goroutine that runs the queue, batch after batch, when no
// statement counts as in flight; b.mu is held. A queued Renew's caller is in its
// call, so that Close waits for the goroutine.
func (b *renewer) start() {
	if b.busy || len(b.queue) == 0 {
		return
	}
	nb, s := b.next(), b.take()
	b.g.Go(func() {
		for nb != nil {
			b.run(nb)
			b.mu.Lock()
			s.end()
			nb = nil
			if !b.busy && len(b.queue) > 0 {
				nb, s = b.next(), b.take()
			}
			b.mu.Unlock()
		}
	})
}

// next takes the next batch off the queue, which is not empty; b.mu is held. A
// Renew of the same lease as one already in the batch waits for the next. The
// batch's context has the values of its first caller's, and ends when every
// caller has given up (renew).
func (b *renewer) next() *renewBatch {
	ops, rest := calls.Batch(b.queue, maxRenewBatch, func(p, o *renewOp) bool {
		return bytes.Equal(p.r.Hash, o.r.Hash) && bytes.Equal(p.r.Token, o.r.Token)
	})
	b.queue = rest
	nb := &renewBatch{ops: ops, left: len(ops)}
	nb.ctx, nb.cancel = context.WithCancel(context.WithoutCancel(ops[0].ctx))
	for _, o := range ops {
		o.b = nb
	}
	return nb
}

// run runs nb's statement and gives each of its Renews its result.
func (b *renewer) run(nb *renewBatch) {
	defer nb.cancel()
	rs := make([]Row, len(nb.ops))
	ttls := make([]time.Duration, len(nb.ops))
	for i, o := range nb.ops {
		rs[i], ttls[i] = o.r, o.ttl
	}
	var held []bool
	var err error
	if len(nb.ops) == 1 { // the plain statement
		var h bool
		h, err = b.d.Renew(nb.ctx, rs[0], ttls[0])
		held = []bool{h}
	} else {
		held, err = b.d.(BatchRenewer).RenewBatch(nb.ctx, rs, ttls)
	}
	if err == nil && len(held) != len(nb.ops) {
		err = errors.New("sqllock: the dialect's RenewBatch returned a result per row that does not match")
	}
	for i, o := range nb.ops {
		if err != nil {
			o.err = err
		} else {
			o.held = held[i]
		}
		close(o.done)
	}
}
