package driver

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// BatchOptions configure a Batcher.
type BatchOptions[Req any] struct {
	// MaxInFlight is how many batches may be in flight at once; 0 means 1.
	MaxInFlight int
	// MaxBatch bounds the requests of one batch; 0 means no bound.
	MaxBatch int
	// Stall is how long a batch in flight counts against MaxInFlight: one in flight
	// for longer (a locked row, a dead connection) no longer holds up the requests
	// queued behind it. 0 means for as long as it is in flight.
	Stall time.Duration
	// Same reports whether two requests must not share a batch (two operations on
	// one lease); the later waits for a later batch. nil means none are.
	Same func(a, b Req) bool
	// Pause, when set, is how long requests queued when a batch ends (one that
	// took took to send) wait before they go as the next batch; the requests that
	// come meanwhile join it. It spaces batches out (SQLite's file lock, free
	// for other processes between them) and makes them larger.
	Pause func(took time.Duration) time.Duration
	// Inline sends a request that goes alone on its caller's goroutine, saving
	// a goroutine's handoff. Set it only when send returns promptly once its
	// context is done: the caller then waits for send.
	Inline bool
	// Go runs the goroutine that sends queued batches; it is called while a caller
	// of Do waits, so Calls.Go fits (Close then waits for it). nil means go.
	Go func(func())
}

// A Batcher sends requests in batches: a Do that finds fewer than MaxInFlight
// batches in flight sends its request at once, alone; the requests that come
// meanwhile queue, and go as one batch when a batch ends. Every batch is sent by a
// goroutine (BatchOptions.Go), on a context that has the values of its first
// caller's and lives while any of its callers still waits; with Inline, a lone
// request is sent on its caller's goroutine and context.
//
// Every caller waits for its own result or its own context, whichever comes first,
// never for another caller's deadline: a caller whose context ends while its
// request is queued gets an error that IsNotSent reports (the request was never
// sent); one whose context ends while its batch is in flight gets its context's
// error (the outcome is unknown).
type Batcher[Req, Res any] struct {
	send func(ctx context.Context, reqs []Req) ([]Res, error)
	o    BatchOptions[Req]

	mu       sync.Mutex
	queue    []*batchCall[Req, Res]
	inFlight int  // batches in flight that still count against MaxInFlight
	paused   bool // the queue waits for Pause to pass
}

type batchCall[Req, Res any] struct {
	ctx  context.Context
	req  Req
	b    *sentBatch // once it has left the queue (under mu)
	res  Res
	err  error         // set before done is closed
	done chan struct{} // closed once the batch has its result
}

// A sentBatch is the calls of one batch that a goroutine sends.
type sentBatch struct {
	ctx    context.Context
	cancel context.CancelFunc
	left   int // callers still waiting for it (under mu)
}

// A batchSlot is a batch in flight.
type batchSlot struct {
	start time.Time
	timer *time.Timer
	aged  bool // in flight for longer than Stall: it no longer counts
	ended bool
}

// NewBatcher returns a Batcher that sends with send, which returns one result per
// request, in order, or one error for all of them.
func NewBatcher[Req, Res any](send func(ctx context.Context, reqs []Req) ([]Res, error), o BatchOptions[Req]) *Batcher[Req, Res] {
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 1
	}
	if o.Go == nil {
		o.Go = func(f func()) { go f() }
	}
	return &Batcher[Req, Res]{send: send, o: o}
}

var errBatchResults = errors.New("driver: a batch returned a number of results that does not match its requests")

// Do sends req, alone or in the next batch, and returns its result by ctx's end.
func (b *Batcher[Req, Res]) Do(ctx context.Context, req Req) (Res, error) {
	if err := ctx.Err(); err != nil {
		var zero Res
		return zero, NotSent(err)
	}
	b.mu.Lock()
	if b.o.Inline && !b.paused && b.inFlight < b.o.MaxInFlight && len(b.queue) == 0 {
		s := b.take()
		b.mu.Unlock()
		res, err := b.sendAll(ctx, []Req{req})
		b.mu.Lock()
		b.end(s)
		b.mu.Unlock()
		if err != nil {
			var zero Res
			return zero, err
		}
		return res[0], nil
	}
	c := &batchCall[Req, Res]{ctx: ctx, req: req, done: make(chan struct{})}
	b.queue = append(b.queue, c)
	b.startQueue()
	b.mu.Unlock()
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var zero Res
	if i := slices.Index(b.queue, c); i >= 0 {
		b.queue = slices.Delete(b.queue, i, i+1)
		return zero, NotSent(ctx.Err())
	}
	if c.b.left--; c.b.left == 0 {
		c.b.cancel()
	}
	return zero, ctx.Err()
}

// Queued returns how many requests wait in the queue.
func (b *Batcher[Req, Res]) Queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// sendAll sends reqs and checks that every request has its result.
func (b *Batcher[Req, Res]) sendAll(ctx context.Context, reqs []Req) ([]Res, error) {
	res, err := b.send(ctx, reqs)
	if err == nil && len(res) != len(reqs) {
		err = errBatchResults
	}
	return res, err
}

// take counts a new batch in flight; b.mu is held.
func (b *Batcher[Req, Res]) take() *batchSlot {
	b.inFlight++
	s := &batchSlot{start: time.Now()}
	if b.o.Stall > 0 {
		s.timer = time.AfterFunc(b.o.Stall, func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if !s.ended {
				s.aged = true
				b.inFlight--
				b.startQueue()
			}
		})
	}
	return s
}

// end stops counting s, and starts the queue if it may go; b.mu is held.
func (b *Batcher[Req, Res]) end(s *batchSlot) {
	if s.timer != nil {
		s.timer.Stop()
	}
	s.ended = true
	if !s.aged {
		b.inFlight--
	}
	if b.o.Pause != nil && len(b.queue) > 0 && !b.paused {
		if d := b.o.Pause(time.Since(s.start)); d > 0 {
			b.paused = true
			time.AfterFunc(d, func() {
				b.mu.Lock()
				defer b.mu.Unlock()
				b.paused = false
				b.startQueue()
			})
			return
		}
	}
	b.startQueue()
}

// startQueue starts goroutines that send the next batches of the queue while fewer
// than MaxInFlight batches count as in flight; b.mu is held. The end of each starts
// the next. The callers of the queue are waiting in Do, so o.Go is called during a
// call.
func (b *Batcher[Req, Res]) startQueue() {
	for !b.paused && b.inFlight < b.o.MaxInFlight && len(b.queue) > 0 {
		calls, sb := b.next()
		s := b.take()
		b.o.Go(func() {
			b.run(calls, sb)
			b.mu.Lock()
			defer b.mu.Unlock()
			b.end(s)
		})
	}
}

// next takes the next batch off the queue, which is not empty; b.mu is held. The
// batch's context has the values of its first caller's, and ends when every caller
// has given up (Do).
func (b *Batcher[Req, Res]) next() ([]*batchCall[Req, Res], *sentBatch) {
	var calls, rest []*batchCall[Req, Res]
	for _, c := range b.queue {
		full := b.o.MaxBatch > 0 && len(calls) >= b.o.MaxBatch
		if !full && (b.o.Same == nil || !slices.ContainsFunc(calls, func(p *batchCall[Req, Res]) bool { return b.o.Same(p.req, c.req) })) {
			calls = append(calls, c)
		} else {
			rest = append(rest, c)
		}
	}
	b.queue = rest
	sb := &sentBatch{left: len(calls)}
	sb.ctx, sb.cancel = context.WithCancel(context.WithoutCancel(calls[0].ctx))
	for _, c := range calls {
		c.b = sb
	}
	return calls, sb
}

// run sends one batch and gives each of its callers its result.
func (b *Batcher[Req, Res]) run(calls []*batchCall[Req, Res], sb *sentBatch) {
	defer sb.cancel()
	reqs := make([]Req, len(calls))
	for i, c := range calls {
		reqs[i] = c.req
	}
	res, err := b.sendAll(sb.ctx, reqs)
	for i, c := range calls {
		if err != nil {
			c.err = err
		} else {
			c.res = res[i]
		}
		close(c.done)
	}
}
