package redisx

import (
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
}

// NewGroup returns an open Group.
func NewGroup() *Group {
	return &Group{quit: make(chan struct{})}
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
// Enter and Leave) or from a goroutine that Go or Call started, so that Wait cannot
// have returned.
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
