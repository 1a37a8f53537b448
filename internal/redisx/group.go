package redisx

import (
	"context"
	"sync"

	"github.com/distlock/distlock"
)

// A Group tracks a Locker's calls and the goroutines they start (commands left
// running by a call whose context ended, cleanups of half-made locks, late answers),
// so that Close can refuse new calls and wait for everything that runs. Make it with
// NewGroup.
type Group struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
	quit   chan struct{} // closed by Close: idle workers end
	pool   workerPool
	// closing is the Done of the contexts that only the Locker's Close ends (see
	// SetInline); nil: none.
	closing <-chan struct{}
}

// NewGroup returns an open Group.
func NewGroup() *Group {
	return &Group{quit: make(chan struct{})}
}

// SetInline tells g that a context whose Done is closing (the shared closing
// context of a driver.Calls) ends only when its Locker closes: a request with such
// a context runs on its caller's goroutine (see Inline), and Close then waits for
// it. Call it before g is used.
func (g *Group) SetInline(closing <-chan struct{}) { g.closing = closing }

// Inline reports whether a request with ctx runs on its caller's goroutine: when
// ctx can never end (context.Background) or only its Locker's Close ends it (see
// SetInline). Such a request ends within the client's timeouts, not when ctx does.
func (g *Group) Inline(ctx context.Context) bool {
	d := ctx.Done()
	return d == nil || d == g.closing
}

// Enter begins a call, which must end with Leave. It returns distlock.ErrClosed
// after Close.
func (g *Group) Enter() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return distlock.ErrClosed
	}
	g.wg.Add(1)
	return nil
}

// Leave ends a call that Enter began.
func (g *Group) Leave() { g.wg.Done() }

// Go runs f on a goroutine that Wait waits for. Call it only during a call (between
// Enter and Leave, or of a Locker whose Close waits for its calls before it calls
// Wait) or from a goroutine that Go or Call started, so that Wait cannot have
// returned.
func (g *Group) Go(f func()) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f()
	}()
}

// Started and Finished bracket a goroutine that Wait waits for, for a caller that
// starts it itself (Go allocates a second closure per goroutine). Started has Go's
// rule: call it only during a call or from one of g's goroutines.
func (g *Group) Started()  { g.wg.Add(1) }
func (g *Group) Finished() { g.wg.Done() }

// Closed reports whether Close was called.
func (g *Group) Closed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// Close makes every later Enter fail with distlock.ErrClosed and lets idle workers
// end. It reports false when it had been called before.
func (g *Group) Close() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.closed = true
	close(g.quit)
	return true
}

// Wait waits for the calls in progress and every goroutine they started.
func (g *Group) Wait() { g.wg.Wait() }

// Run runs job on one of g's workers, which keep their grown stacks between jobs
// (see workerPool), for a fan-out that starts one call per node. Call it during a
// call of g, or from one of g's goroutines.
func (g *Group) Run(job func()) { g.run(funcJob(job)) }
