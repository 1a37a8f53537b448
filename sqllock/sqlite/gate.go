package sqlite

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/distlock/distlock/driver"
)

// A gate runs the writing statements of the Lockers of one *sql.DB in group
// commits (a driver.Batcher): the statements queued while a transaction runs go
// as the next one (BEGIN IMMEDIATE ... COMMIT), so that they share its commit and
// its fsync. SQLite runs one writer per file anyway. Without the gate, the
// statements of one process queued in SQLite's busy handler, which sleeps (1, 2,
// 5, ... 100ms) between looks at the file lock, and each paid a commit of its own.
// Each statement still returns only once its transaction has committed, with the
// durability that the database's synchronous setting gives; each caller returns by
// its own context (do). Other processes still wait in the busy handler.
type gate struct {
	db    *sql.DB
	refs  int // Lockers using it; guarded by gatesMu
	batch *driver.Batcher[*op, error]
	wg    sync.WaitGroup // the Batcher's goroutines
}

// An op is one caller's statements in a transaction.
type op struct {
	run func(ctx context.Context, c *sql.Conn) error

	mu      sync.Mutex
	started bool // run has been called
	left    bool // the caller gave up before run was called: it never will be
}

// newGate returns the gate of db.
func newGate(db *sql.DB) *gate {
	g := &gate{db: db}
	g.batch = driver.NewBatcher(g.commit, driver.BatchOptions[*op]{Go: g.wg.Go, Pause: pause})
	return g
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
		g = newGate(db)
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

// do runs run in the next transaction and returns its error, or the
// transaction's. When ctx ends first, it returns at once: an error wrapping
// errNotRun if run had not been called (it never will be), else ctx's error: run's
// outcome is then unknown. The statements of a transaction are interrupted only
// when all its callers have given up (an interrupt rolls the whole of it back).
func (g *gate) do(ctx context.Context, run func(ctx context.Context, c *sql.Conn) error) error {
	o := &op{run: run}
	err, berr := g.batch.Do(ctx, o)
	switch {
	case berr == nil:
		return err
	case driver.IsNotSent(berr):
		return errors.Join(errNotRun, berr)
	case berr != ctx.Err(): // the transaction's error (BEGIN, COMMIT)
		return berr
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.started {
		o.left = true
		return errors.Join(errNotRun, berr)
	}
	return berr
}

// pause is how long the callers queued when a transaction that held the file's
// write lock for took ends wait for the next one: took, at most maxPause, so that
// under a steady load the file is free at least half the time. Other processes
// wait for the lock in SQLite's busy handler, which only looks now and then, and a
// process that took the lock again at once would starve them. The callers that
// come meanwhile join the next transaction.
func pause(took time.Duration) time.Duration { return min(took, maxPause) }

// maxPause bounds the pause between transactions.
const maxPause = 5 * time.Millisecond

// begin marks o as started, or reports false when its caller has given up.
func (o *op) begin() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.started = !o.left
	return o.started
}

// commit runs ops in one transaction and commits it, returning each op's error.
// An op whose statement failed gets its error (SQLite rolled that statement back)
// and the ops after it errNotRun, and so does an op whose caller gave up before it
// ran; the error of BEGIN or COMMIT (nothing committed) is returned for all of
// them.
func (g *gate) commit(ctx context.Context, ops []*op) ([]error, error) {
	c, err := g.db.Conn(ctx)
	if err != nil {
		return nil, errors.Join(errNotRun, err)
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return nil, err // SQLite rolls a failed BEGIN back
	}
	errs := make([]error, len(ops))
	failed := false
	for i, o := range ops {
		if failed || !o.begin() {
			errs[i] = errNotRun
			continue
		}
		if errs[i] = o.run(ctx, c); errs[i] != nil {
			failed = true
		}
	}
	if _, err := c.ExecContext(ctx, `COMMIT`); err != nil {
		rctx := context.WithoutCancel(ctx) // also after an interrupt
		if _, rerr := c.ExecContext(rctx, `ROLLBACK`); rerr != nil && !noTx(rerr) {
			// The connection may still be in the transaction: drop it.
			_ = c.Raw(func(any) error { return sqldriver.ErrBadConn })
		}
		return nil, err
	}
	return errs, nil
}

// noTx reports whether err says that no transaction was active (SQLite had rolled
// it back).
func noTx(err error) bool {
	return strings.Contains(err.Error(), "no transaction is active")
}
