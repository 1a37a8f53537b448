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
// commits: one leader at a time runs every statement queued meanwhile in one
// transaction (BEGIN IMMEDIATE ... COMMIT), so that they share its commit and its
// fsync, and the callers queued while it runs form the next one. SQLite runs one
// writer per file anyway. Without the gate, the statements of one process queued
// in SQLite's busy handler, which sleeps (1, 2, 5, ... 100ms) between looks at the
// file lock, and each paid a commit of its own: W1's p99 with 16 goroutines was
// 532-666ms. Each statement still returns only once its transaction has committed,
// with the durability that the database's synchronous setting gives. Other
// processes still wait in the busy handler.
type gate struct {
	db   *sql.DB
	refs int // Lockers using it; guarded by gatesMu

	mu      sync.Mutex
	queue   []*op     // waiting for the next batch
	leading bool      // a caller leads a batch, or has been told to
	next    time.Time // the next batch begins no earlier (see runBatch)
}

// An op is one caller's statements in a batch.
type op struct {
	run  func(ctx context.Context, c *sql.Conn) error
	err  error         // run's error, or the batch's; set before done is closed
	done chan struct{} // closed once the batch committed or failed
	lead chan struct{} // receives when the caller is to lead the next batch
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

// releaseGate drops a reference to the gate of db, forgetting it after the last.
func releaseGate(db *sql.DB) {
	gatesMu.Lock()
	defer gatesMu.Unlock()
	if g := gates[db]; g != nil {
		if g.refs--; g.refs == 0 {
			delete(gates, db)
		}
	}
}

// do runs run in the next batch and returns its error, or the batch's. When ctx
// ends first, it returns an error wrapping errNotRun if run had not started (it
// never will), else ctx's error: run's outcome is then unknown. run's statements
// are not interrupted (an interrupt would roll the whole batch back).
func (g *gate) do(ctx context.Context, run func(ctx context.Context, c *sql.Conn) error) error {
	o := &op{run: run, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, o)
	if !g.leading {
		g.leading = true
		o.lead <- struct{}{}
	}
	g.mu.Unlock()
	select {
	case <-o.done:
		return o.err
	case <-o.lead:
		g.runBatch()
		return o.err
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	i := slices.Index(g.queue, o)
	if i < 0 {
		return ctx.Err() // in a batch that another caller runs
	}
	g.queue = slices.Delete(g.queue, i, i+1)
	select {
	case <-o.lead: // told to lead: pass it on
		g.promote()
	default:
	}
	return errors.Join(errNotRun, ctx.Err())
}

// promote tells the first queued caller to lead, or ends the leading; g.mu is held.
func (g *gate) promote() {
	if len(g.queue) == 0 {
		g.leading = false
		return
	}
	g.queue[0].lead <- struct{}{}
}

// runBatch runs the queue (which holds the leader's own op) in one transaction,
// then hands the leading on.
//
// When callers queued while a batch held the file's write lock for d, the next
// batch waits until d has passed, so that under a steady load the file is free at
// least half the time: other processes wait for the lock in SQLite's busy
// handler, which only looks now and then, and a process that took the lock again
// at once would starve them. The callers that come meanwhile join the next batch.
func (g *gate) runBatch() {
	g.mu.Lock()
	wait := time.Until(g.next)
	g.mu.Unlock()
	if wait > 0 {
		time.Sleep(wait)
	}
	g.mu.Lock()
	batch := g.queue
	g.queue = nil
	g.mu.Unlock()
	start := time.Now()
	err := g.commit(batch)
	end := time.Now()
	for _, o := range batch {
		if err != nil {
			o.err = err
		}
		close(o.done)
	}
	g.mu.Lock()
	if len(g.queue) > 0 { // back to back: pause
		g.next = end.Add(min(end.Sub(start), maxPause))
	}
	g.promote()
	g.mu.Unlock()
}

// maxPause bounds the pause between batches.
const maxPause = 5 * time.Millisecond

// commit runs the ops of batch in one transaction and commits it. An op whose
// statement failed gets its error (SQLite rolled that statement back) and the ops
// after it errNotRun; the error of BEGIN or COMMIT (nothing committed) is
// returned for all of them.
func (g *gate) commit(batch []*op) error {
	ctx := context.Background()
	c, err := g.db.Conn(ctx)
	if err != nil {
		return errors.Join(errNotRun, err)
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return err // SQLite rolls a failed BEGIN back
	}
	failed := false
	for _, o := range batch {
		if failed {
			o.err = errNotRun
			continue
		}
		if o.err = o.run(ctx, c); o.err != nil {
			failed = true
		}
	}
	if _, err := c.ExecContext(ctx, `COMMIT`); err != nil {
		if _, rerr := c.ExecContext(ctx, `ROLLBACK`); rerr != nil && !noTx(rerr) {
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
