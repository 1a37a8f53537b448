package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"
)

// A gate runs the writing statements of the Lockers of one *sql.DB in group
// commits: a goroutine of the gate runs every statement queued meanwhile in one
// transaction (BEGIN IMMEDIATE ... COMMIT), so that they share its commit and its
// fsync, and the callers queued while it runs form the next one. SQLite runs one
// writer per file anyway. Without the gate, the statements of one process queued
// in SQLite's busy handler, which sleeps (1, 2, 5, ... 100ms) between looks at the
// file lock, and each paid a commit of its own. Each statement still returns only
// once its transaction has committed, with the durability that the database's
// synchronous setting gives; each caller returns by its own context (do). Other
// processes still wait in the busy handler.
type gate struct {
	db   *sql.DB
	refs int // Lockers using it; guarded by gatesMu

	mu      sync.Mutex
	queue   []*op     // waiting for the next batch
	running bool      // the goroutine runs batches; it ends when the queue is empty
	next    time.Time // the next batch begins no earlier (see take)
	wg      sync.WaitGroup
}

// An op is one caller's statements in a batch.
type op struct {
	run func(ctx context.Context, c *sql.Conn) error
	// Under gate.mu:
	b       *gateBatch // once it has left the queue
	started bool       // run has been called
	left    bool       // the caller gave up before run was called: it never will be

	err  error         // run's error, or the batch's; set before done is closed
	done chan struct{} // closed once the batch committed or failed
}

// A gateBatch is the ops of one transaction.
type gateBatch struct {
	ops    []*op
	ctx    context.Context // ends when every caller has given up
	cancel context.CancelFunc
	left   int // callers still waiting (under gate.mu)
}

// errNotRun: the op was not run (a previous statement of its batch failed, or its
// caller left before it ran); nothing of it reached the database.
var errNotRun = errors.New("sqlite: the statement was not run")

var (
	gatesMu sync.Mutex
	gates   = map[*sql.DB]*gate{}
)

// gateOf returns the gate of db, shared by the Lockers on db until each released it.
func gateOf(db *sql.DB) *gate {
	gatesMu.Lock()
	defer gatesMu.Unlock()
	g := gates[db]
	if g == nil {
		g = &gate{db: db}
		gates[db] = g
	}
	g.refs++
	return g
}

// releaseGate drops a reference to the gate of db. After the last, it forgets the
// gate and waits for its goroutine, which runs only batches whose callers have all
// given up (their statements interrupted) by then.
func releaseGate(db *sql.DB) {
	gatesMu.Lock()
	g := gates[db]
	if g == nil {
		gatesMu.Unlock()
		return
	}
	g.refs--
	last := g.refs == 0
	if last {
		delete(gates, db)
	}
	gatesMu.Unlock()
	if last {
		g.wg.Wait()
	}
}

// do runs run in the next batch and returns its error, or the batch's. When ctx
// ends first, it returns at once: an error wrapping errNotRun if run had not been
// called (it never will be), else ctx's error: run's outcome is then unknown. The
// statements of a batch are interrupted only when all its callers have given up
// (an interrupt rolls the whole batch back).
func (g *gate) do(ctx context.Context, run func(ctx context.Context, c *sql.Conn) error) error {
	o := &op{run: run, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, o)
	if !g.running {
		g.running = true
		g.wg.Go(g.loop)
	}
	g.mu.Unlock()
	select {
	case <-o.done:
		return o.err
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if i := slices.Index(g.queue, o); i >= 0 {
		g.queue = slices.Delete(g.queue, i, i+1)
		return errors.Join(errNotRun, ctx.Err())
	}
	if o.b.left--; o.b.left == 0 {
		o.b.cancel()
	}
	if !o.started {
		o.left = true
		return errors.Join(errNotRun, ctx.Err())
	}
	return ctx.Err()
}

// loop runs batches until the queue is empty.
func (g *gate) loop() {
	for b := g.take(); b != nil; b = g.take() {
		g.runBatch(b)
	}
}

// take returns the queue as the next batch, or nil (ending the loop) when it is
// empty.
//
// When callers queued while a batch held the file's write lock for d, the next
// batch waits until d has passed, so that under a steady load the file is free at
// least half the time: other processes wait for the lock in SQLite's busy
// handler, which only looks now and then, and a process that took the lock again
// at once would starve them. The callers that come meanwhile join the next batch.
func (g *gate) take() *gateBatch {
	g.mu.Lock()
	wait := time.Until(g.next)
	g.mu.Unlock()
	if wait > 0 {
		time.Sleep(wait)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) == 0 {
		g.running = false
		return nil
	}
	b := &gateBatch{ops: g.queue, left: len(g.queue)}
	g.queue = nil
	b.ctx, b.cancel = context.WithCancel(context.Background())
	for _, o := range b.ops {
		o.b = b
	}
	return b
}

// runBatch runs b in one transaction and gives each op its result.
func (g *gate) runBatch(b *gateBatch) {
	defer b.cancel()
	start := time.Now()
	err := g.commit(b)
	end := time.Now()
	for _, o := range b.ops {
		if err != nil {
			o.err = err
		}
		close(o.done)
	}
	g.mu.Lock()
	if len(g.queue) > 0 { // back to back: pause
		g.next = end.Add(min(end.Sub(start), maxPause))
	}
	g.mu.Unlock()
}

// maxPause bounds the pause between batches.
const maxPause = 5 * time.Millisecond

// begin marks o as started, or reports false when its caller has given up.
func (g *gate) begin(o *op) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	o.started = !o.left
	return o.started
}

// commit runs the ops of b in one transaction and commits it. An op whose
// statement failed gets its error (SQLite rolled that statement back) and the ops
// after it errNotRun, and so does an op whose caller gave up before it ran; the
// error of BEGIN or COMMIT (nothing committed) is returned for all of them.
func (g *gate) commit(b *gateBatch) error {
	ctx := b.ctx
	c, err := g.db.Conn(ctx)
	if err != nil {
		return errors.Join(errNotRun, err)
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return err // SQLite rolls a failed BEGIN back
	}
	failed := false
	for _, o := range b.ops {
		if failed || !g.begin(o) {
			o.err = errNotRun
			continue
		}
		if o.err = o.run(ctx, c); o.err != nil {
			failed = true
		}
	}
	if _, err := c.ExecContext(ctx, `COMMIT`); err != nil {
		rctx := context.WithoutCancel(ctx) // also after an interrupt
		if _, rerr := c.ExecContext(rctx, `ROLLBACK`); rerr != nil && !noTx(rerr) {
			// The connection may still be in the transaction: drop it.
			_ = c.Raw(func(any) error { return driver.ErrBadConn })
		}
		return err
	}
	return nil
}

// noTx reports whether err says that no transaction was active (SQLite had rolled
// it back).
func noTx(err error) bool {
	return strings.Contains(err.Error(), "no transaction is active")
}
