package postgres

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/calls"
)

// Statements shared by concurrent callers.
//
// A Locker's TryLocks (and, apart, its Unlocks) run at most maxFlights statements
// at a time. A call that finds a slot free runs its own statement, on its own
// context, as it would alone. A call that finds every slot taken queues; when a
// statement ends, the calls queued meanwhile go as one statement over arrays of
// their rows (unnest ... WITH ORDINALITY), one round trip and one commit for all of
// them, run by a goroutine of the Locker on a context that ends only when every
// caller of the batch has given up. Each caller still gets the result of its own
// row. Under load (16 goroutines on 2 cores) this costs the server and the client
// one statement, one transaction and one wakeup per batch instead of one per call.

// maxFlights is the number of a Locker's acquire (and, apart, release) statements
// in flight at once. With 1, a pair spent the least CPU at 16 goroutines (client
// and server together, 2 CPUs: 86-110 us against 163-186 us with 2, 230-500 with
// 4, 300-365 with 8, and 425-470 us on the code before batching; the advisory
// lock 120-139 us), but on the loaded machine of the matrix the calls then wait
// for slow round trips: there 2 did better (W1 at 16 goroutines 0.36-1.43x the
// advisory lock, median 0.48, against 0.27-0.55 with 1; before batching
// 0.31-0.76, median 0.40). A statement in flight for longer than stallAfter (a
// row lock held by a long transaction, a slow link) stops counting, so that it
// holds up the Locker's other calls no longer than that. maxBatch bounds the rows
// of one batch.
const (
	maxFlights = 2
	stallAfter = 20 * time.Millisecond
	maxBatch   = 256
)

// A call is one TryLock's acquire or one Unlock's release, queued for a batch.
type call struct {
	ctx context.Context
	r   rowArgs

	// Set by the batch before done is closed.
	res  result
	done chan struct{}
}

// rowArgs are what a batch needs of one call.
type rowArgs struct {
	hash, key, token []byte
	us               int64 // ttl in microseconds (acquire)
}

// result is the outcome of one call in a batch.
type result struct {
	fence int64 // acquire: > 0 won, 0 held
	ok    bool  // release: held
	err   error
	// known is false when err leaves the call's outcome unknown (the batch's
	// statement may have committed): then sess is the batch's session.
	known bool
	sess  sqllock.Session
}

// A flights is the queue and the slots of one kind of statement.
type flights struct {
	run func(ctx context.Context, cs []*call) // runs a batch of two or more calls, or one

	max   int           // statements in flight at most: maxFlights
	stall time.Duration // stallAfter

	mu    sync.Mutex
	busy  int
	queue []*call
	wg    *sync.WaitGroup // the batches' goroutines
}

// A slot is a statement in flight.
type slot struct {
	f     *flights
	timer *time.Timer
	aged  bool // in flight for longer than stall: it no longer counts
	ended bool
}

// take counts a new statement in flight; f.mu is held.
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

// enter returns a slot of the caller's own when fewer than max statements are in
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

// leave ends s: the calls queued meanwhile go as the next batch.
func (s *slot) leave() {
	s.timer.Stop()
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	s.ended = true
	if !s.aged {
		f.busy--
	}
	f.next()
}

// next starts a batch of the queued calls while a slot is free; f.mu is held.
// Two calls of the same lease (hash and token: two Unlocks of one lease) never
// share a batch; TryLocks of one key may (one of them wins, the others find the
// key held).
func (f *flights) next() {
	for f.busy < f.max && len(f.queue) > 0 {
		batch, rest := calls.Batch(f.queue, maxBatch, func(b, c *call) bool {
			return bytes.Equal(b.r.hash, c.r.hash) && bytes.Equal(b.r.token, c.r.token)
		})
		f.queue = rest
		s := f.take()
		f.wg.Go(func() {
			f.runBatch(batch)
			s.leave()
		})
	}
}

// runBatch runs batch on a context that ends when the contexts of all its callers
// have ended.
func (f *flights) runBatch(batch []*call) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
	defer cancel()
	var left atomic.Int64
	left.Store(int64(len(batch)))
	for _, c := range batch {
		stop := context.AfterFunc(c.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	// Sorted by key_hash: the TryLocks of one key are neighbours (wonInBatch),
	// and a plan that runs through the arrays in their order locks the rows in
	// one order in every batch (the statements look the rows up by key_hash =
	// ANY, which takes them in one order too).
	slices.SortFunc(batch, func(a, b *call) int { return bytes.Compare(a.r.hash, b.r.hash) })
	f.run(ctx, batch)
	for _, c := range batch {
		close(c.done)
	}
}

// queued returns the number of queued calls.
func (f *flights) queued() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queue)
}

// wait waits for c's result, or until ctx ends. It reports false when ctx ended
// first: queued is then true when c was still queued (it is removed and never
// sent).
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
func (h *handles) add(c *call) sqllock.Session {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls == nil {
		h.calls = make(map[int64]*call)
	}
	h.last++
	h.calls[h.last] = c
	return sqllock.Session{ID: -h.last}
}

// take removes and returns the call that s names (nil if none).
func (h *handles) take(s sqllock.Session) *call {
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
func (d *dialect) endBatch(ctx context.Context, s sqllock.Session) error {
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
		if err == nil || errors.Is(err, sqllock.ErrCannotEnd) {
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
