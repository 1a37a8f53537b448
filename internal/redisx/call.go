package redisx

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Call runs f and returns its result, or returns ctx.Err() as soon as ctx is done,
// whichever comes first. Call it during a call of g (between Enter and Leave).
//
// go-redis does not interrupt a command that is waiting for its reply when the
// context is cancelled (and, unless the client sets ContextTimeoutEnabled, it ignores
// the context's deadline too: it waits for ReadTimeout). So when ctx can be cancelled,
// f runs on another goroutine, one of g's workers (see workerPool), and Call waits for
// it or for ctx. If ctx wins, f keeps running until the client's own timeouts end it,
// and its late result is handed to abandon (when non-nil) on that goroutine; abandon
// must be bounded too. g's Wait waits for both. When ctx can never be done
// (context.Background), f runs on the caller's goroutine.
func Call[T any](ctx context.Context, g *Group, f func() (T, error), abandon func(T, error)) (T, error) {
	if ctx.Done() == nil {
		return f()
	}
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	const (
		pending = iota
		delivered
		abandoned
	)
	var state atomic.Int32
	ch := make(chan result, 1)
	g.run(func() {
		v, err := f()
		if state.CompareAndSwap(pending, delivered) {
			ch <- result{v, err}
			return
		}
		if abandon != nil {
			abandon(v, err)
		}
	})
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		if state.CompareAndSwap(pending, abandoned) {
			var zero T
			return zero, ctx.Err()
		}
		// f finished just now: its result is on its way and is better than none.
		r := <-ch
		return r.v, r.err
	}
}

// workerIdle is how long a worker waits for its next job before it ends.
const workerIdle = 100 * time.Millisecond

// A workerPool runs jobs on goroutines that it keeps for reuse while jobs keep
// coming. A new goroutine per command costs more than the command's own CPU in the
// client: it starts with a small stack, which a go-redis command grows (copying it)
// several times; a worker keeps its grown stack. Idle workers end after workerIdle,
// or when the Group closes, so an idle Locker keeps no goroutine.
type workerPool struct {
	mu   sync.Mutex
	idle []*worker // LIFO: the busiest workers stay warm, the others time out
}

// A worker is one goroutine of a workerPool.
type worker struct {
	jobs chan func() // capacity 1: the next job, sent by whoever took it off idle
}

// run runs job on an idle worker, or on a new one that g's Wait waits for.
func (g *Group) run(job func()) {
	p := &g.pool
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.jobs <- job
		return
	}
	p.mu.Unlock()
	w := &worker{jobs: make(chan func(), 1)}
	g.Go(func() { w.loop(p, job, g.quit) })
}

// loop runs job, then waits on the idle list for the next one, until it has waited
// workerIdle or quit is closed.
func (w *worker) loop(p *workerPool, job func(), quit <-chan struct{}) {
	var t *time.Timer
	for {
		job()
		job = nil // let its closure go while idle
		p.mu.Lock()
		p.idle = append(p.idle, w)
		p.mu.Unlock()
		if t == nil {
			t = time.NewTimer(workerIdle)
		} else {
			t.Reset(workerIdle)
		}
		select {
		case job = <-w.jobs:
			continue
		case <-t.C:
		case <-quit:
			t.Stop()
		}
		p.mu.Lock()
		if i := slices.Index(p.idle, w); i >= 0 {
			p.idle = slices.Delete(p.idle, i, i+1)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		// Someone took w off the idle list just now: its job is on the way.
		job = <-w.jobs
	}
}

// A Result is the outcome of a function that Async ran.
type Result[T any] struct {
	V   T
	Err error
}

// Async runs f on one of g's workers and delivers its result on the returned
// channel, which is buffered: f never waits for its reader. Call it during a call of
// g.
func Async[T any](g *Group, f func() (T, error)) <-chan Result[T] {
	ch := make(chan Result[T], 1)
	g.run(func() {
		v, err := f()
		ch <- Result[T]{v, err}
	})
	return ch
}
