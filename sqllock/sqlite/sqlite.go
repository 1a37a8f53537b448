package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/sqllock"
)

// backend is the Backend of the Locker's errors.
const backend = "sqllock/sqlite"

// A Locker keeps leases as rows of a table in an SQLite database file. It
// implements distlock.Locker, distlock.Inspector and distlock.Waiter (its Waits
// of a key share one poller: see sqllock.Locker.Wait), and is safe for concurrent
// use. Its methods are sqllock.Locker's (see there for their contracts), but for
// Close. The zero value is not usable; call New, and Close when done.
type Locker struct {
	*sqllock.Locker
	db    *sql.DB
	close sync.Once // releases db's gate
}

var (
	_ distlock.Locker    = (*Locker)(nil)
	_ distlock.Inspector = (*Locker)(nil)
	_ distlock.Waiter    = (*Locker)(nil)
)

// New returns a Locker whose leases are rows of a table in the SQLite database that
// db opens with the pure-Go driver modernc.org/sqlite (which this package imports,
// registering the driver "sqlite"). It is for processes on one host that share a
// database file: SQLite's file locks make them exclude each other.
//
// db must be a database file (not ":memory:", which gives every connection of the
// pool its own database), opened with a busy timeout, so that writers wait for each
// other instead of failing with SQLITE_BUSY: for example
// "file:/var/lib/app/locks.db?_pragma=busy_timeout(5000)"; New returns an error
// wrapping distlock.ErrInvalid when the connection it checks has none. New switches
// the file to write-ahead logging (journal_mode=WAL, which persists in the file),
// creates the table if it is missing (unless Options.SkipCreateTable) and adds the
// table's fence high-water row if it is missing, with ctx. db stays the caller's:
// close it after the Locker. A nil db or invalid opts is the returned error, an
// *distlock.OpError wrapping distlock.ErrInvalid that names the bad value.
//
// The Lockers of one process on one db run their writing statements in group
// commits: the statements that arrive while a transaction commits run together
// in the next (BEGIN IMMEDIATE ... COMMIT), sharing its fsync, instead of waiting
// for each other in SQLite's busy handler, which polls; each returns once its
// transaction has committed. Give each process one *sql.DB per file. Each call
// returns when its context ends: a statement that has not started never runs; one
// that has started is not interrupted (the call returns, its outcome unknown, and
// TryLock's row is released in the background) unless every caller of its group
// commit has given up.
//
// Expiry uses SQLite's clock (the host's), in milliseconds; rows expire 1ms later
// than the ttl asks, to cover the clock's truncation.
func New(ctx context.Context, db *sql.DB, opts *sqllock.Options) (*Locker, error) {
	if db == nil {
		return nil, newError(fmt.Errorf("%w: nil *sql.DB", distlock.ErrInvalid))
	}
	o, err := opts.WithDefaults()
	if err != nil {
		return nil, newError(err)
	}
	d := &dialect{db: db, owner: o.Owner, sql: newStatements(o.Table), gate: gateOf(db)}
	if err := d.setup(ctx, o.Table, o.SkipCreateTable); err != nil {
		releaseGate(db)
		return nil, newError(err)
	}
	core, err := sqllock.NewLocker(backend, d, &o)
	if err != nil {
		releaseGate(db)
		return nil, err
	}
	return &Locker{Locker: core, db: db}, nil
}

func newError(err error) error {
	return &distlock.OpError{Backend: backend, Op: "New", Err: err}
}

// setup checks the busy timeout, switches to WAL, creates the table unless skip is
// set, and adds its high-water row.
func (d *dialect) setup(ctx context.Context, table string, skip bool) error {
	var busy int64
	if err := d.db.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy); err != nil {
		return fmt.Errorf("read busy_timeout: %w", err)
	}
	if busy <= 0 {
		return fmt.Errorf(`%w: the database has no busy timeout; open it with one, e.g. "file:locks.db?_pragma=busy_timeout(5000)"`, distlock.ErrInvalid)
	}
	err := driver.Retry(ctx, d.Retryable, func() error {
		var mode string
		return d.db.QueryRowContext(ctx, `PRAGMA journal_mode = WAL`).Scan(&mode)
	})
	if err != nil {
		return fmt.Errorf("set journal_mode=WAL: %w", err)
	}
	var stmts []string
	if !skip {
		stmts = d.sql.create
	}
	for _, q := range append(stmts, d.sql.highWater...) {
		err := driver.Retry(ctx, d.Retryable, func() error {
			_, err := d.db.ExecContext(ctx, q)
			return err
		})
		if err != nil {
			return fmt.Errorf("table %s: %w", table, err)
		}
	}
	return nil
}

// DDL returns the statements that create the lease table named table (empty:
// sqllock.DefaultTable) and its fence high-water row, separated by semicolons, for
// schemas managed by migrations (then set Options.SkipCreateTable). A table name
// that sqllock.Options rejects is an *distlock.OpError wrapping
// distlock.ErrInvalid. For the default table:
//
//	CREATE TABLE IF NOT EXISTS "distlock_leases" (
//		key_hash BLOB NOT NULL PRIMARY KEY,
//		lock_key BLOB NOT NULL,
//		token BLOB NOT NULL,
//		fence INTEGER NOT NULL,
//		expires_at INTEGER NOT NULL, -- milliseconds since the Unix epoch
//		owner TEXT NOT NULL
//	) WITHOUT ROWID;
//	INSERT INTO "distlock_leases" (key_hash, lock_key, token, fence, expires_at, owner)
//	VALUES (X'0000000000000000000000000000000000000000000000000000000000000000', X'', X'', 0, 0, 'distlock: fence high-water mark')
//	ON CONFLICT (key_hash) DO NOTHING;
func DDL(table string) (string, error) {
	o, err := (&sqllock.Options{Table: table}).WithDefaults()
	if err != nil {
		return "", &distlock.OpError{Backend: backend, Op: "DDL", Err: err}
	}
	return strings.Join(newStatements(o.Table).ddl(), ";\n") + ";\n", nil
}

// Close stops the Locker's background work and waits for it; see
// sqllock.Locker.Close. It does not close db.
func (l *Locker) Close() error {
	err := l.Locker.Close()
	l.close.Do(func() { releaseGate(l.db) })
	return err
}
