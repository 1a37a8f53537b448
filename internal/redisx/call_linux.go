//go:build linux

package redisx

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// On Linux, Call hands its command to a worker and waits for the reply through
// eventfds, not channels. A channel send to a parked goroutine makes it runnable and
// also wakes an idle thread (on its own processor) when a processor is idle; a
// lone caller that hands each command to a worker and waits for its reply paid two
// such wakeups per command, each a futex call and a thread switched in and out on
// the other CPU (about 9% of an uncontended TryLock+Unlock on a 2-CPU machine). A
// goroutine that waits on an eventfd becomes runnable through the runtime's network
// poller instead, which the thread that runs out of work next (here, the one that
// ran the other side of the handoff) polls before it sleeps: no thread is woken.
// It costs a system call per handoff instead (a write; the waiter does not read),
// and a poll of the network by the scheduler, which is why Call takes this path only
// while few calls are in flight.
//
// Each call watches its context with context.AfterFunc, which is cheap for the
// standard library's contexts; for another implementation of Done it starts a
// goroutine per call. The eventfds held are one per worker of the fdPool (workers
// end after workerIdle) and one per waker in the pool of wakers.

// A waker is an eventfd that one goroutine at a time waits on. It is never read:
// each signal (a write) is an edge for the poller, and the waiter checks its own
// condition (ready) when it starts waiting and after each wakeup, so no system call
// reads the counter (it grows by one a signal, and would overflow after 2^64).
type waker struct {
	f        *os.File
	rc       syscall.RawConn
	deadline time.Time          // the read deadline set on f
	ready    func(uintptr) bool // what wait waits for
	state    *atomic.Int32      // a call's waker: the state of its current call
}

// wakeOne is the eventfd increment of a signal.
var wakeOne = binary.NativeEndian.AppendUint64(nil, 1)

func newWaker() (*waker, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "redisx-waker")
	rc, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return &waker{f: f, rc: rc}, nil
}

// signal wakes the waiter, or makes the next wait check its condition at once. A
// write to an eventfd fails only when its counter would overflow, or after close.
func (w *waker) signal() { _, _ = w.f.Write(wakeOne) }

// wait returns when ready reports true, which it calls first and then after each
// signal; or at deadline (zero: none), with an error wrapping
// os.ErrDeadlineExceeded.
func (w *waker) wait(deadline time.Time) error {
	if !deadline.Equal(w.deadline) {
		if err := w.f.SetReadDeadline(deadline); err != nil {
			return err
		}
		w.deadline = deadline
	}
	return w.rc.Read(w.ready)
}

func (w *waker) close() { _ = w.f.Close() }

// wakers holds the wakers of finished calls. One that the pool drops is closed by
// the os.File's cleanup.
var wakers sync.Pool

// getWaker returns a call's waker, which waits until its state is not pending.
func getWaker() (*waker, error) {
	if w, ok := wakers.Get().(*waker); ok {
		return w, nil
	}
	w, err := newWaker()
	if err != nil {
		return nil, err
	}
	w.ready = func(uintptr) bool { return w.state.Load() != pending }
	return w, nil
}

// callFast is Call with a context that can be cancelled, through a worker of g's
// fdPool. It reports false when it could not make an eventfd (the caller then takes
// the channel path).
func callFast[T any](ctx context.Context, g *Group, f func() (T, error), abandon func(T, error)) (T, error, bool) {
	w, err := getWaker()
	if err != nil {
		var zero T
		return zero, nil, false
	}
	c := &fdCall[T]{f: f, abandon: abandon, w: w}
	w.state = &c.state
	// One signal comes to w: from the worker when f's result is in, or from ctx's
	// AfterFunc when ctx is done first (whichever ends pending). The AfterFunc is
	// set first, so that the caller parks right after the handoff: the worker runs
	// once it has.
	stop := context.AfterFunc(ctx, c.cancel)
	if !g.runFD(c) {
		g.run(c)
	}
	if err := w.wait(time.Time{}); err != nil {
		// A wait without a deadline does not fail; should it, wait for the
		// state, and drop w.
		for c.state.Load() == pending {
			time.Sleep(time.Millisecond)
		}
	} else {
		w.state = nil
		wakers.Put(w) // a signal of c may still come: a later wait checks its own state
	}
	stop()
	if c.state.Load() == abandoned {
		var zero T
		return zero, ctx.Err(), true
	}
	return c.v, c.err, true
}

// An fdCall is one callFast that runs on a worker.
type fdCall[T any] struct {
	f       func() (T, error)
	abandon func(T, error)
	state   atomic.Int32
	w       *waker // the caller's
	v       T      // set before the state leaves pending
	err     error
}

func (c *fdCall[T]) run() {
	v, err := c.f()
	c.v, c.err = v, err
	if c.state.CompareAndSwap(pending, delivered) {
		c.w.signal()
		return
	}
	if c.abandon != nil {
		c.abandon(v, err)
	}
}

// cancel runs when the caller's context is done.
func (c *fdCall[T]) cancel() {
	if c.state.CompareAndSwap(pending, abandoned) {
		c.w.signal()
	}
}

// An fdPool is a workerPool whose workers wait on a waker (see above). Close wakes
// its idle workers (wakeIdle).
type fdPool struct {
	mu   sync.Mutex
	idle []*fdWorker // LIFO, as workerPool's
}

// An fdWorker is one goroutine of an fdPool.
type fdWorker struct {
	w    *waker
	job  job       // the next job, set under fdPool.mu by whoever took the worker off idle
	last time.Time // when the worker last went idle
}

// runFD runs j on an idle worker of g's fdPool, or on a new one that g's Wait
// waits for. It reports false when it could not make a new worker's eventfd.
func (g *Group) runFD(j job) bool {
	p := &g.fd
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		w.job = j
		p.mu.Unlock()
		w.w.signal()
		return true
	}
	p.mu.Unlock()
	wk, err := newWaker()
	if err != nil {
		return false
	}
	w := &fdWorker{w: wk}
	quit := g.quit
	wk.ready = func(uintptr) bool {
		p.mu.Lock()
		has := w.job != nil
		p.mu.Unlock()
		return has || closed(quit)
	}
	g.Go(func() { w.loop(p, j, quit) })
	return true
}

// wakeIdle wakes the idle workers, for Close: they end.
func (p *fdPool) wakeIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.idle {
		w.w.signal()
	}
}

// loop runs j, then waits on the idle list for the next one, until it has waited
// workerIdle or quit is closed. As workerPool's, its deadline is not moved per job:
// when it passes, the worker ends only if it has been idle since workerIdle ago.
func (w *fdWorker) loop(p *fdPool, j job, quit <-chan struct{}) {
	defer w.w.close()
	deadline := time.Now().Add(workerIdle)
	for {
		j.run()
		j = nil // let it go while idle
		w.last = time.Now()
		p.mu.Lock()
		p.idle = append(p.idle, w)
		p.mu.Unlock()
		for j == nil {
			var err error
			end := closed(quit)
			if !end {
				err = w.w.wait(deadline)
			}
			p.mu.Lock()
			// A job is set in the same critical section that takes w off the
			// idle list: without one, w is still on it.
			if j, w.job = w.job, nil; j != nil {
				p.mu.Unlock()
				break
			}
			switch {
			case end || closed(quit):
				end = true
			case errors.Is(err, os.ErrDeadlineExceeded):
				if d := workerIdle - time.Since(w.last); d > 0 {
					deadline = time.Now().Add(d)
				} else {
					end = true
				}
			case err != nil:
				end = true
			}
			// Else a late signal of a job taken already: wait again.
			if end {
				if i := slices.Index(p.idle, w); i >= 0 {
					p.idle = slices.Delete(p.idle, i, i+1)
				}
				p.mu.Unlock()
				return
			}
			p.mu.Unlock()
		}
	}
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
