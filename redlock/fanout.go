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
	res := make([]reply[T], len(l.nodes))
	if len(idx) == 0 {
		return res
	}
	deadline := time.Now().Add(timeout)
	type msg struct {
		i   int
		v   T
		err error
	}
	ch := make(chan msg, len(idx))
	states := make([]atomic.Int32, len(l.nodes))
	// One context for all the calls, cancelled by the last one to finish (never
	// earlier: an abandoned call still runs to its end).
	cctx, cancel := context.WithDeadline(ctx, deadline)
	var running atomic.Int32
	running.Store(int32(len(idx)))
	finished := func() {
		if running.Add(-1) == 0 {
			cancel()
		}
	}
	for _, i := range idx {
		res[i].ran = true
		res[i].suspect = l.suspect[i].Load()
		l.group.Run(func() {
			v, err := f(cctx, i)
			finished()
			if ctx.Err() == nil {
				l.suspect[i].Store(err != nil)
			}
			if states[i].CompareAndSwap(pending, delivered) {
				ch <- msg{i, v, err}
				return
			}
			if late != nil {
				late(i, v, err)
			}
		})
	}
	begin := time.Now()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	waiting := len(idx)
	decided := false
	var cause error
collect:
	for waiting > 0 {
		select {
		case m := <-ch:
			res[m.i].v, res[m.i].err, res[m.i].answered = m.v, m.err, true
			waiting--
			if !decided && waiting > 0 && enough != nil && enough(res) {
				decided = true
				if !linger {
					break collect
				}
				now := time.Now()
				if until := now.Add(max(now.Sub(begin), decidedGrace)); until.Before(deadline) {
					timer.Reset(until.Sub(now))
				}
			}
		case <-timer.C:
			break collect
		case <-ctx.Done():
			cause = ctx.Err()
			break collect
		}
	}
	if waiting == 0 {
		return res
	}
	// Abandon the calls that have not answered; those that answered just now are on
	// their way and are better than nothing.
	racing := 0
	for _, i := range idx {
		if res[i].answered {
			continue
		}
		if states[i].CompareAndSwap(pending, abandoned) {
			switch {
			case cause != nil:
				res[i].err = fmt.Errorf("%w: %w", errNoReply, cause)
			case decided:
				res[i].err = fmt.Errorf("%w (outcome decided by the other nodes)", errNoReply)
			default:
				l.suspect[i].Store(true)
				res[i].err = fmt.Errorf("%w (node timeout %v)", errNoReply, timeout)
			}
		} else {
			racing++
		}
	}
	for range racing {
		m := <-ch
		res[m.i].v, res[m.i].err, res[m.i].answered = m.v, m.err, true
	}
	return res
}
