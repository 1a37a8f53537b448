package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// A gate lets one writing statement of a *sql.DB run at a time. SQLite runs one
// writer per file anyway; without the gate, the statements of one process queue in
// SQLite's busy handler, which sleeps (1, 2, 5, ... 100ms) between looks at the
// file lock, so that a writer can sleep long after the lock was free, and W1's
// p99 with 16 goroutines was 532-666ms. Waiting on a channel wakes the next writer
// at once. Other processes still wait in the busy handler.
type gate struct {
	ch   chan struct{} // holds a token while a writer runs
	refs int           // Lockers using it; guarded by gatesMu
}

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
		g = &gate{ch: make(chan struct{}, 1)}
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

// enter waits for the gate, or for ctx to end; leave lets the next writer in.
func (g *gate) enter(ctx context.Context) error {
	select {
	case g.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gate) leave() { <-g.ch }
