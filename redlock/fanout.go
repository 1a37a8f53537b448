package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// A reply is one node's answer in a fan-out.
type reply[T any] struct {
	v        T
	err      error // the node's error, or errNoReply when it did not answer in time
	ran      bool  // the node was asked
	answered bool  // the node answered (v or err came from it)
	suspect  bool  // the node's previous call had failed when this one began
}

// errNoReply marks a node that did not answer before the per-node deadline (or
// before the caller's context ended).
var errNoReply = errors.New("no reply in time")

// decidedGrace is the least time a fan-out waits for the remaining nodes once the
// outcome is decided.
const decidedGrace = time.Millisecond

// Per-node call states of a fan-out.
const (
	pending int32 = iota
	delivered
	abandoned
)

// fanout asks the nodes in idx (all nodes when idx is nil) concurrently, each with
// f(ctx, i), and waits until every one has answered, the per-node timeout has passed
// since the fan-out began, or ctx is done, whichever comes first. When enough is not
// nil and reports, after some answer, that the answers so far decide the outcome,
// fanout returns at once (Unlock: the calls not waited for run on), or, when
// linger is set (TryLock's phase 1, where every extra lock makes the lease
// sturdier and an Unlock right after it finds every lock made, and Renew, whose
// caller should know each node's lease before it goes on), waits for the others
// only as long again as
// the fan-out has taken so far (at least decidedGrace): a node that is down or slow
// then costs an operation no more than twice the healthy nodes' round trip, while
// nodes that are merely a little slower than the quorum still take part. Calls that
// are not waited for still run to their end. enough may decide without a suspect
// that has not answered yet (a node whose last call failed or timed out is a suspect
// until a call to it succeeds), so a node that is down costs an operation nothing
// once the others have decided it; but a suspect's silence must never decide a
// failure by itself (counted as failed, suspects that are healthy again, after a
// network hiccup, would fail the next call at once). It returns one
// reply per node of the Locker (by node index); a node that was not asked has
// ran == false, and a node that did not answer in time has an error wrapping
// errNoReply (and ctx's error, when ctx ended).
//
// go-redis does not interrupt a command that waits for its reply (unless the client
// enables ContextTimeoutEnabled), so each call runs on its own goroutine, a worker of
// l.group that keeps its grown stack between calls (one that Close waits for) and an unanswered call is abandoned, not stopped: it ends within
// the client's own timeouts. When it does, its result goes to late (when not nil), on
// that goroutine; late must be bounded too. Call fanout during a call of l (or from a
// goroutine of l.group).
func fanout[T any](ctx context.Context, l *Locker, idx []int, timeout time.Duration,
	f func(ctx context.Context, i int) (T, error), late func(i int, v T, err error),
	enough func(res []reply[T]) bool, linger bool) []reply[T] {
	if idx == nil {
		idx = l.all
	}
	fo := &fan[T]{l: l, idx: idx, res: make([]reply[T], len(l.nodes))}
	if len(idx) == 0 {
		return fo.res
	}
	fo.launch(ctx, time.Now().Add(timeout), f, late)
	decided, cause := fo.collect(ctx, enough, linger)
	if fo.waiting > 0 {
		fo.abandon(decided, cause, timeout)
	}
	return fo.res
}

// A fan is one fanout in progress.
type fan[T any] struct {
	l        *Locker
	idx      []int
	res      []reply[T]
	ch       chan fanMsg[T]
	states   []atomic.Int32 // per node: pending, delivered or abandoned
	deadline time.Time
	waiting  int // calls not collected yet
}

// A fanMsg is one node's answer, delivered to the fan-out.
type fanMsg[T any] struct {
	i   int
	v   T
	err error
}

// launch starts f on each node of fo.idx, on workers of l.group, with one context
// for all the calls that ends at deadline, cancelled by the last call to finish
// (never earlier: an abandoned call still runs to its end). A call's answer is
// delivered to fo.ch unless the fan-out abandoned it; then it goes to late.
func (fo *fan[T]) launch(ctx context.Context, deadline time.Time,
	f func(ctx context.Context, i int) (T, error), late func(i int, v T, err error)) {
	l := fo.l
	fo.deadline = deadline
	fo.ch = make(chan fanMsg[T], len(fo.idx))
	fo.states = make([]atomic.Int32, len(l.nodes))
	fo.waiting = len(fo.idx)
	cctx, cancel := context.WithDeadline(ctx, deadline)
	var running atomic.Int32
	running.Store(int32(len(fo.idx)))
	finished := func() {
		if running.Add(-1) == 0 {
			cancel()
		}
	}
	for _, i := range fo.idx {
		fo.res[i].ran = true
		fo.res[i].suspect = l.suspect[i].Load()
		l.group.Run(func() {
			v, err := f(cctx, i)
			finished()
			if ctx.Err() == nil {
				l.suspect[i].Store(err != nil)
			}
			if fo.states[i].CompareAndSwap(pending, delivered) {
				fo.ch <- fanMsg[T]{i, v, err}
				return
			}
			if late != nil {
				late(i, v, err)
			}
		})
	}
}

// collect gathers the answers until every call answered, the deadline passed, or
// ctx ended (its error is cause); once enough reports the outcome decided, it
// stops at once, or with linger only after as long again as the fan-out has taken
// so far (at least decidedGrace, at most until the deadline).
func (fo *fan[T]) collect(ctx context.Context, enough func(res []reply[T]) bool, linger bool) (decided bool, cause error) {
	begin := time.Now()
	timer := time.NewTimer(time.Until(fo.deadline))
	defer timer.Stop()
	for fo.waiting > 0 {
		select {
		case m := <-fo.ch:
			fo.store(m)
			if !decided && fo.waiting > 0 && enough != nil && enough(fo.res) {
				decided = true
				if !linger {
					return decided, nil
				}
				now := time.Now()
				if until := now.Add(max(now.Sub(begin), decidedGrace)); until.Before(fo.deadline) {
					timer.Reset(until.Sub(now))
				}
			}
		case <-timer.C:
			return decided, nil
		case <-ctx.Done():
			return decided, ctx.Err()
		}
	}
	return decided, nil
}

// store records answer m.
func (fo *fan[T]) store(m fanMsg[T]) {
	fo.res[m.i].v, fo.res[m.i].err, fo.res[m.i].answered = m.v, m.err, true
	fo.waiting--
}

// abandon gives up the calls that have not answered: each gets an error wrapping
// errNoReply (and cause), and a node that timed out becomes a suspect. Those that
// answered just now are on their way and are better than nothing: it takes them.
func (fo *fan[T]) abandon(decided bool, cause error, timeout time.Duration) {
	racing := 0
	for _, i := range fo.idx {
		if fo.res[i].answered {
			continue
		}
		if !fo.states[i].CompareAndSwap(pending, abandoned) {
			racing++
			continue
		}
		switch {
		case cause != nil:
			fo.res[i].err = fmt.Errorf("%w: %w", errNoReply, cause)
		case decided:
			fo.res[i].err = fmt.Errorf("%w (outcome decided by the other nodes)", errNoReply)
		default:
			fo.l.suspect[i].Store(true)
			fo.res[i].err = fmt.Errorf("%w (node timeout %v)", errNoReply, timeout)
		}
	}
	for range racing {
		fo.store(<-fo.ch)
	}
}
