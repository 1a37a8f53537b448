// Package sqltest holds the tests that every sqllock dialect package runs against
// its database: table names, keys as bytes, hash collisions, owners, renewals that
// never shorten, many concurrent renewals, concurrent creation, the DDL, Prune,
// Close and the errors. Each dialect's tests call Run with an Env that reaches its
// test server.
package sqltest

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/faultproxy"
	"github.com/distlock/distlock/sqllock"
)

// A Locker is the Locker of a dialect package.
type Locker interface {
	distlock.Locker
	distlock.Inspector
	Prune(ctx context.Context, olderThan time.Duration) (int64, error)
	Table() string
	Owner() string
	Close() error
}

// An Env reaches one dialect's test database. Every Locker it makes shares that
// database.
type Env struct {
	// Backend is the Backend of the dialect's errors ("sqllock/postgres").
	Backend string
	// New returns a Locker on a database handle of its own, closed (after the
	// Locker) when t ends.
	New func(t *testing.T, opts *sqllock.Options) Locker
	// Constructor returns the dialect's New bound to a fresh database handle,
	// closed when t ends, so that tests can call it from other goroutines.
	Constructor func(t *testing.T) func(opts *sqllock.Options) (Locker, error)
	// NilHandle calls the dialect's New with a nil database handle.
	NilHandle func(ctx context.Context) error
	// Exec runs a statement directly on the database.
	Exec func(t *testing.T, query string, args ...any)
	// DDL is the dialect's DDL function.
	DDL func(table string) (string, error)
	// Schema is a schema (or attached database) that exists, for a qualified table
	// name.
	Schema string
	// InsertRow returns a statement that inserts into table a row with the
	// arguments key_hash, lock_key, token, fence, and an expiry an hour ago.
	InsertExpired func(table string) string
	// MultiStatement reports whether Exec runs a DDL string of several
	// statements at once; when it does not, the test splits it at ";\n".
	MultiStatement bool
}

// Run runs every shared test on e.
func Run(t *testing.T, e Env) {
	t.Run("BadTableNames", e.testBadTableNames)
	t.Run("TableNames", e.testTableNames)
	t.Run("KeyBytes", e.testKeyBytes)
	t.Run("HashCollision", e.testHashCollision)
	t.Run("OwnerAndRowsKept", e.testOwnerAndRowsKept)
	t.Run("RenewNeverShortens", e.testRenewNeverShortens)
	t.Run("RenewMany", e.testRenewMany)
	t.Run("ConcurrentCreate", e.testConcurrentCreate)
	t.Run("DDL", e.testDDL)
	t.Run("Prune", e.testPrune)
	t.Run("PruneWhileAcquiring", e.testPruneWhileAcquiring)
	t.Run("Close", e.testClose)
	t.Run("Errors", e.testErrors)
}

// OpCtx returns a context for one call, bounded generously for a shared machine.
func OpCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Key returns a key that no other test uses.
func Key(prefix string) string { return prefix + "-" + driver.NewToken() }

// A Server is a test database server (testenv's PostgresServer, MariaDBServer).
type Server interface {
	Pause(testing.TB)
	Resume(testing.TB)
	Restart(testing.TB)
	External() bool
}

// ServerFaults are the conformance faults of srv. An External server (given by an
// environment variable) cannot be paused or restarted: those tests are then
// reported as not run.
func ServerFaults(srv Server) conformance.Faults {
	if srv.External() {
		return conformance.Faults{}
	}
	return conformance.Faults{
		PauseServer: func(t *testing.T) func() {
			srv.Pause(t)
			return func() { srv.Resume(t) }
		},
		RestartServer: func(t *testing.T) { srv.Restart(t) },
	}
}

// ProxiedClient returns the conformance client of l, whose Crash is crash and whose
// Partition and Delay act on its fault proxy p.
func ProxiedClient(l distlock.Locker, p *faultproxy.Proxy, crash func()) conformance.Client {
	return conformance.Client{
		Locker: l,
		Crash:  crash,
		Partition: func() func() {
			p.Blackhole()
			return p.Heal
		},
		Delay: func(d time.Duration) func() {
			p.Delay(d)
			return func() { p.Delay(0) }
		},
	}
}
