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
// and its late result is dropped (the caller, which returned ctx's error, cleans up
// what f may have done). g's Wait waits for f. When ctx can never be done
// (context.Background) or only its Locker's Close ends it (g.Inline), f runs on the
// caller's goroutine.
func Call[T any](ctx context.Context, g *Group, f func() (T, error)) (T, error) {
	if g.Inline(ctx) {
		return f()
	}
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, err
	}
	return callRun(ctx, g, f)
}

// callRun is Call with a context that can be done, which runs f even when ctx is done
// already (and then returns ctx's error at once, as when ctx ends while f runs): a
// caller that must know f ran (RunShared's lone call, whose end frees its slot)
// checks ctx first itself.
func callRun[T any](ctx context.Context, g *Group, f func() (T, error)) (T, error) {
	c := &call[T]{f: f, done: make(chan struct{}, 1)}
	g.run(c)
	select {
	case <-c.done:
	case <-ctx.Done():
		if c.state.CompareAndSwap(pending, abandoned) {
			var zero T
			return zero, ctx.Err()
		}
		// f finished just now: its result is on its way and is better than none.
		<-c.done
	}
	return c.v, c.err
}

// The states of a call.
const (
	pending = iota
	delivered
	abandoned
)

// A call is one Call that runs on a worker.
type call[T any] struct {
	f     func() (T, error)
	state atomic.Int32
	done  chan struct{} // capacity 1: signalled once v and err are set
	v     T
	err   error
}

func (c *call[T]) run() {
	v, err := c.f()
	if c.state.CompareAndSwap(pending, delivered) {
		c.v, c.err = v, err
		c.done <- struct{}{}
	}
}

// A job is what a worker runs.
type job interface{ run() }

// funcJob is a func as a job.
type funcJob func()

func (f funcJob) run() { f() }

// workerIdle is how long a worker waits for its next job before it ends (a
// variable for tests).
var workerIdle = 100 * time.Millisecond

// A workerPool runs jobs on goroutines that it keeps for reuse while jobs keep
// coming, so a job runs on a stack that earlier go-redis commands have grown. Idle
// workers end after workerIdle, or when the Group closes, so an idle Locker keeps
// no goroutine.
type workerPool struct {
	mu   sync.Mutex
	idle []*worker // LIFO: the busiest workers stay warm, the others time out
}

// A worker is one goroutine of a workerPool.
type worker struct {
	jobs chan job  // capacity 1: the next job, sent by whoever took it off idle
	last time.Time // when the worker last went idle
}

// run runs j on an idle worker, or on a new one that g's Wait waits for.
func (g *Group) run(j job) {
	p := &g.pool
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.jobs <- j
		return
	}
	p.mu.Unlock()
	w := &worker{jobs: make(chan job, 1)}
	g.Go(func() { w.loop(p, j, g.quit) })
}

// loop runs j, then waits on the idle list for the next one, until it has waited
// workerIdle or quit is closed. Its timer is not reset per job: when it fires, the
// worker ends only if it has been idle since workerIdle ago, else it sleeps for the
// rest of that time.
func (w *worker) loop(p *workerPool, j job, quit <-chan struct{}) {
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		j.run()
		j = nil // let it go while idle
		w.last = time.Now()
		p.mu.Lock()
		p.idle = append(p.idle, w)
		p.mu.Unlock()
	wait:
		select {
		case j = <-w.jobs:
			continue
		case <-t.C:
			if d := workerIdle - time.Since(w.last); d > 0 {
				t.Reset(d)
				goto wait
			}
		case <-quit:
		}
		p.mu.Lock()
		if i := slices.Index(p.idle, w); i >= 0 {
			p.idle = slices.Delete(p.idle, i, i+1)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		// Someone took w off the idle list just now: its job is on the way.
		j = <-w.jobs
		t.Reset(workerIdle)
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
	g.run(funcJob(func() {
		v, err := f()
		ch <- Result[T]{v, err}
	}))
	return ch
}
