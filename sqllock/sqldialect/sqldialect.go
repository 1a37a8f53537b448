// Package sqldialect is for the authors of SQL dialects of sqllock: the Dialect
// interface a dialect implements (one statement per operation on the table of
// leases), its types, and helpers. Applications use sqllock/postgres,
// sqllock/mysql or sqllock/sqlite and never import it.
package sqldialect

import (
	"context"
	"errors"
	"strings"
	"time"
)

// A Dialect runs the statements of one database on one table. The packages
// sqllock/postgres, sqllock/mysql and sqllock/sqlite implement it and wrap the
// Locker that sqllock.NewLocker makes of it; a dialect of another database must
// keep the contracts below.
//
// Every method makes one attempt, and returns once its context is done (the
// Locker runs a lone Renew on its caller's goroutine and relies on it); the
// Locker validates, retries (Retryable),
// bounds, and cleans up after an unknown outcome (Definite). Every statement that
// reads or writes a key's row compares lock_key with Row.Key as well as key_hash
// with Row.Hash, and compares expires_at with the database's clock, never the
// client's.
type Dialect interface {
	// Acquire runs the single acquiring statement: insert the key's row, with a
	// fence above the table's high-water mark, or take the row over when it has
	// expired, incrementing its fence; expires_at becomes the database's now + ttl
	// (rounded up). won reports whether r.Token now owns the key; fence is then its
	// fence. s names the database session that the statement was sent on, learned
	// before it was sent (zero when it cannot be named). An error from before the
	// statement was sent must be wrapped with driver.NotSent.
	Acquire(ctx context.Context, r Row, ttl time.Duration) (fence int64, won bool, s Session, err error)
	// EndSession ends the database session s and returns nil once it has ended (or
	// had ended before): no statement sent on it can commit after that. It returns
	// ErrSessionLive while the session is still there, and an error wrapping
	// ErrCannotEnd when the database refused.
	EndSession(ctx context.Context, s Session) error
	// Renew moves the expiry of the row that r.Token owns to the later of its
	// expiry and now + ttl (never earlier); held is false when r.Token does not own
	// an unexpired row.
	Renew(ctx context.Context, r Row, ttl time.Duration) (held bool, err error)
	// Release sets the expiry of the row that r.Token owns to now, keeping the row
	// and its fence; held is false when r.Token did not own an unexpired row.
	Release(ctx context.Context, r Row) (held bool, err error)
	// Inspect reads the unexpired row of r.Key (r.Token is empty); found is false
	// when the key is free.
	Inspect(ctx context.Context, r Row) (st RowState, found bool, err error)
	// Prune deletes a batch of rows: it reads the key hashes, after after in
	// byte order, of up to limit rows whose expiry is more than olderThan in the
	// past by the database's clock; if there are none it returns a nil last. Then,
	// in one transaction that first locks the high-water row against every
	// concurrent Acquire, it raises the high-water mark to the largest fence of the
	// rows it deletes, and deletes the rows in (after, last] that still match. It
	// returns how many it deleted, and last. The high-water row itself is never
	// deleted; if it is missing, Prune returns an error.
	Prune(ctx context.Context, after []byte, olderThan time.Duration, limit int) (deleted int64, last []byte, err error)
	// Retryable reports whether err means that the database rolled the statement
	// back and it may simply run again (serialization failure, deadlock, busy).
	Retryable(err error) bool
	// Definite reports whether err was reported by the database for a statement
	// that therefore had no effect; any other error leaves the outcome unknown.
	Definite(err error) bool
}

// A Row names the row of one key, and the token of one lease on it.
type Row struct {
	Hash  []byte // SHA-256 of Key: the primary key (key_hash)
	Key   []byte // the key's bytes (lock_key)
	Token []byte // the lease's token (token); empty for Inspect
}

// A RowState is an unexpired row, as Dialect.Inspect reads it.
type RowState struct {
	Fence     int64
	Remaining time.Duration // expires_at minus the database's now
	Owner     string
}

// A Session names a database session (one connection's server side).
type Session struct {
	ID int64 // PostgreSQL backend pid, MySQL connection id; 0: unknown
	// Start is PostgreSQL's backend_start, so that a reused pid names no other
	// session. Zero for MySQL, whose connection ids are not reused while the server
	// runs.
	Start time.Time
}

// HighWaterHash is the key_hash of the table's high-water row, 32 zero bytes: its
// fence is at least the fence of every row that Prune deleted, and new rows start
// above it. Its lock_key is empty, so that no key's statements ever match it (keys
// are never empty).
const HighWaterHash = "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"

// HighWaterOwner is the owner column of the high-water row.
const HighWaterOwner = "distlock: fence high-water mark"

var (
	// ErrSessionLive is what Dialect.EndSession returns while the session has not
	// ended yet.
	ErrSessionLive = errors.New("sqldialect: the database session has not ended yet")
	// ErrCannotEnd is wrapped by what Dialect.EndSession returns when the database
	// refused to end the session.
	ErrCannotEnd = errors.New("sqldialect: cannot end the database session")
)

// A BatchRenewer is a Dialect that can renew many rows in one statement. The
// Locker of such a Dialect sends the Renews that come while one of its statements
// is in flight as the next batch (a driver.Batcher), so that many leases
// (distlock.Hold of thousands) share round trips: each Renew still gets its own
// row's result, returns by its own context, and its Expires counts from before it
// was called. A statement in flight for longer than 100ms (a row locked by a long
// transaction, a dead connection) no longer holds up the Renews behind it.
type BatchRenewer interface {
	// RenewBatch is Dialect.Renew of rs[i] for ttls[i], for every i, in one
	// statement; no two of rs have the same Hash and Token. held[i] is Renew's
	// held for rs[i].
	RenewBatch(ctx context.Context, rs []Row, ttls []time.Duration) (held []bool, err error)
}

// QuoteTable returns table, a name that sqllock.Options.WithDefaults accepted, with each part
// quoted by q: a double quote for PostgreSQL and SQLite, a backtick for MySQL. The
// parts are identifiers, so they contain no quote characters.
func QuoteTable(table string, q byte) string {
	parts := strings.Split(table, ".")
	for i, p := range parts {
		parts[i] = string(q) + p + string(q)
	}
	return strings.Join(parts, ".")
}

// Micros returns d in whole microseconds, rounded up, for a ttl a statement adds to
// the database's clock: a lease never expires before the ttl it was given.
func Micros(d time.Duration) int64 {
	us := d / time.Microsecond
	if d%time.Microsecond != 0 {
		us++
	}
	return int64(us)
}
