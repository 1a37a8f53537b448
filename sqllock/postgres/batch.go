package postgres

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/distlock/distlock/sqllock/sqldialect"
)

// Acquires shared by concurrent callers.
//
// A Locker's TryLocks run at most maxFlights round trips at a time. A TryLock
// that finds a slot free runs its own statement, on its own context, as it would
// alone. One that finds every slot taken queues; when a round trip ends, the
// acquires queued meanwhile go as one pipeline of their statements (batchsql.go):
// one round trip and one transaction (one commit) for all of them, run by a
// goroutine of the Locker on a context that ends only when every caller of the
// batch has given up. Each caller still gets the result of its own statement.
// Releases never queue: each Unlock runs its own statement at once.

// maxFlights is the number of a Locker's acquire round trips in flight at once:
// with 2, a round trip that the scheduler delays holds up only half of the
// queued calls. A round trip in flight for longer than stallAfter (a row lock
// held by a long transaction, a slow link) stops counting, so that it holds up
// the Locker's other calls no longer than that. maxBatch bounds the calls of one
// batch.
const (
	maxFlights = 2
	stallAfter = 20 * time.Millisecond
	maxBatch   = 256
)

// A call is one TryLock's acquire, queued for a batch.
type call struct {
	ctx context.Context
	r   rowArgs
	b   *batch // once it has left the queue (under flights.mu)

	// Set by the batch before done is closed.
	res  result
	done chan struct{}
}

// rowArgs are what an acquire needs of one call.
type rowArgs struct {
	hash, key, token []byte
	us               int64 // ttl in microseconds
}

// result is the outcome of one acquire.
type result struct {
	fence int64 // > 0 won, 0 held
	err   error
	// known is false when err leaves the call's outcome unknown (the batch's
	// statement may have committed): then sess is the batch's session.
	known bool
	sess  sqldialect.Session
}

// A batch is the calls of one round trip.
type batch struct {
	calls  []*call
	ctx    context.Context
	cancel context.CancelFunc
	left   int // callers still waiting for it (under flights.mu)
}

// A flights is the queue and the slots of a Locker's acquires.
type flights struct {
	run func(ctx context.Context, cs []*call) // runs a batch of one or more calls

	max   int           // round trips in flight at most: maxFlights
	stall time.Duration // stallAfter

	mu    sync.Mutex
	busy  int
	queue []*call
	wg    *sync.WaitGroup // the batches' goroutines
}

// A slot is a round trip in flight.
type slot struct {
	f     *flights
	timer *time.Timer
	aged  bool // in flight for longer than stall: it no longer counts
	ended bool
}

// take counts a new round trip in flight; f.mu is held.
func (f *flights) take() *slot {
	f.busy++
	s := &slot{f: f}
	s.timer = time.AfterFunc(f.stall, s.age)
	return s
}

// age stops counting s, which has been in flight for too long: the calls queued
// meanwhile go as the next batch.
func (s *slot) age() {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.ended {
		return
	}
	s.aged = true
	f.busy--
	f.next()
}

// enter returns a slot of the caller's own when fewer than max round trips are in
// flight (the caller must leave it when its statement has ended); otherwise it
// returns the queued call.
func (f *flights) enter(ctx context.Context, r rowArgs) (*slot, *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.busy < f.max {
		return f.take(), nil
	}
	c := &call{ctx: ctx, r: r, done: make(chan struct{})}
	f.queue = append(f.queue, c)
	return nil, c
}

// end stops counting s; f.mu is held.
func (s *slot) end() {
	s.timer.Stop()
	s.ended = true
	if !s.aged {
		s.f.busy--
	}
}

// leave ends s: the calls queued meanwhile go as the next batch.
func (s *slot) leave() {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	s.end()
	f.next()
}

// then ends s, the slot of a batch's goroutine, and returns the next batch and its
// slot for that goroutine to run (nil when no call is queued), so that a
// goroutine, whose stack has grown to the driver's depth, runs batch after batch.
func (s *slot) then() (*slot, *batch) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	s.end()
	if f.busy >= f.max || len(f.queue) == 0 {
		return nil, nil
	}
	b := f.batch()
	return f.take(), b
}

// batch takes the next batch (the first maxBatch queued calls) off the queue;
// f.mu is held. Acquires of the same key may share a batch: it runs them in turn.
func (f *flights) batch() *batch {
	n := min(len(f.queue), maxBatch)
	cs := slices.Clone(f.queue[:n])
	f.queue = slices.Delete(f.queue, 0, n)
	b := &batch{calls: cs, left: len(cs)}
	// The batch's context has the values of its first caller's, and ends when
	// every caller has given up (wait).
	b.ctx, b.cancel = context.WithCancel(context.WithoutCancel(cs[0].ctx))
	for _, c := range cs {
		c.b = b
	}
	return b
}

// next starts batches of the queued calls while a slot is free; f.mu is held.
//
// A batch's goroutine, once its callers have their results, yields before it
// gives its slot up (then): the callers, just woken, run first, and the calls
// they make next queue for the slot's next batch.
func (f *flights) next() {
	for f.busy < f.max && len(f.queue) > 0 {
		b, s := f.batch(), f.take()
		f.wg.Go(func() {
			for b != nil {
				f.runBatch(b)
				runtime.Gosched()
				s, b = s.then()
			}
		})
	}
}

// runBatch runs b and gives each of its calls its result.
func (f *flights) runBatch(b *batch) {
	defer b.cancel()
	// Sorted by key_hash: a batch takes its rows in one order, as every other
	// batch does (of this Locker or another).
	slices.SortFunc(b.calls, func(x, y *call) int { return bytes.Compare(x.r.hash, y.r.hash) })
	f.run(b.ctx, b.calls)
	for _, c := range b.calls {
		close(c.done)
	}
}

// queued returns the number of queued calls.
func (f *flights) queued() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queue)
}

// wait waits for c's result, or until ctx (c's context) ends. It reports false
// when ctx ended first: queued is then true when c was still queued (it is removed
// and never sent); otherwise c's batch goes on, and its context ends when its
// last caller has left.
func (f *flights) wait(ctx context.Context, c *call) (res result, ok, queued bool) {
	select {
	case <-c.done:
		return c.res, true, false
	case <-ctx.Done():
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if i := slices.Index(f.queue, c); i >= 0 {
		f.queue = slices.Delete(f.queue, i, i+1)
		return result{}, false, true
	}
	if c.b.left--; c.b.left == 0 {
		c.b.cancel()
	}
	return result{}, false, false
}

// handles names, by a negative Session.ID, the calls whose callers left while
// their batch ran (Dialect.Acquire returned the handle as the statement's session),
// until the cleanup's EndSession has waited for the batch.
type handles struct {
	mu    sync.Mutex
	last  int64
	calls map[int64]*call
}

// add returns the session that names c.
func (h *handles) add(c *call) sqldialect.Session {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls == nil {
		h.calls = make(map[int64]*call)
	}
	h.last++
	h.calls[h.last] = c
	return sqldialect.Session{ID: -h.last}
}

// take removes and returns the call that s names (nil if none).
func (h *handles) take(s sqldialect.Session) *call {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.calls[-s.ID]
	delete(h.calls, -s.ID)
	return c
}

// endBatch is EndSession of the session that names a call whose caller left while
// its batch ran: it waits until the batch has ended (its goroutine runs nothing
// more for the call after that), then, when the call's outcome is unknown, ends
// the batch's session and waits until it is gone. The handle is used once: a
// later call finds nothing to wait for.
func (d *dialect) endBatch(ctx context.Context, s sqldialect.Session) error {
	c := d.gaveUp.take(s)
	if c == nil {
		return nil
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if c.res.known || c.res.sess.ID == 0 {
		return nil
	}
	sleep := time.Millisecond
	for {
		err := d.EndSession(ctx, c.res.sess)
		if err == nil || errors.Is(err, sqldialect.ErrCannotEnd) {
			return err
		}
		t := time.NewTimer(sleep)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		}
		sleep = min(2*sleep, 100*time.Millisecond)
	}
}
