package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// sqliteNow is the database's clock in whole milliseconds since the Unix epoch.
// SQLite reads the clock once per statement step, in milliseconds.
const sqliteNow = `CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER)`

// NewSQLite returns a Locker whose leases are rows of a table in the SQLite database
// that db opens with the pure-Go driver modernc.org/sqlite (driver name "sqlite"),
// and creates the table if it is missing. It is for processes on one host that share
// a database file: SQLite's file locks make them exclude each other.
//
// db must be a database file (not ":memory:", which gives every connection of the
// pool its own database), opened with a busy timeout, so that writers wait for each
// other instead of failing with SQLITE_BUSY: for example
// "file:/var/lib/app/locks.db?_pragma=busy_timeout(5000)". NewSQLite returns an
// error wrapping distlock.ErrInvalid when the connection it checks has none. It
// switches the file to write-ahead logging (journal_mode=WAL, which persists in the
// file). db must stay open while the Locker is used; the Locker does not close it.
//
// Expiry uses SQLite's clock (the host's), in milliseconds; rows expire 1ms later
// than the ttl asks, to cover the clock's truncation. The Locker has no Wait:
// distlock.Lock polls with backoff.
func NewSQLite(ctx context.Context, db *sql.DB, opts *Options) (*Locker, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: NewSQLite: nil *sql.DB", distlock.ErrInvalid)
	}
	r, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	d := newSQLiteDialect(db, r)
	var busy int64
	if err := db.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy); err != nil {
		return nil, fmt.Errorf("sqllock: read busy_timeout: %w", err)
	}
	if busy <= 0 {
		return nil, fmt.Errorf(`%w: NewSQLite: the database has no busy timeout; open it with one, e.g. "file:locks.db?_pragma=busy_timeout(5000)"`, distlock.ErrInvalid)
	}
	l := newLocker(d, r)
	err = l.retry(ctx, func() error {
		var mode string
		return db.QueryRowContext(ctx, `PRAGMA journal_mode = WAL`).Scan(&mode)
	})
	if err != nil {
		return nil, fmt.Errorf("sqllock: set journal_mode=WAL: %w", err)
	}
	err = l.retry(ctx, func() error {
		_, err := db.ExecContext(ctx, d.create)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqllock: create table %s: %w", r.name(), err)
	}
	return l, nil
}

type sqliteDialect struct {
	db                                                   *sql.DB
	owner                                                string
	create, acquireSQL, renewSQL, releaseSQL, inspectSQL string
}

func newSQLiteDialect(db *sql.DB, r resolved) *sqliteDialect {
	t := r.quoted(`"`)
	return &sqliteDialect{
		db:    db,
		owner: r.owner,
		create: `CREATE TABLE IF NOT EXISTS ` + t + ` (
	key_hash BLOB NOT NULL PRIMARY KEY,
	lock_key BLOB NOT NULL,
	token BLOB NOT NULL,
	fence INTEGER NOT NULL,
	expires_at INTEGER NOT NULL, -- milliseconds since the Unix epoch
	owner TEXT NOT NULL
) WITHOUT ROWID`,
		// In DO UPDATE, bare column names are the existing row's.
		acquireSQL: `INSERT INTO ` + t + ` (key_hash, lock_key, token, fence, expires_at, owner)
VALUES (?1, ?2, ?3, 1, ` + sqliteNow + ` + ?4, ?5)
ON CONFLICT (key_hash) DO UPDATE
SET token = excluded.token, fence = fence + 1, expires_at = excluded.expires_at, owner = excluded.owner
WHERE expires_at <= ` + sqliteNow + ` AND lock_key = excluded.lock_key
RETURNING fence`,
		// max: a renewal never moves the expiry earlier.
		renewSQL: `UPDATE ` + t + ` SET expires_at = max(expires_at, ` + sqliteNow + ` + ?4)
WHERE key_hash = ?1 AND lock_key = ?2 AND token = ?3 AND expires_at > ` + sqliteNow,
		releaseSQL: `UPDATE ` + t + ` SET expires_at = ` + sqliteNow + `
WHERE key_hash = ?1 AND lock_key = ?2 AND token = ?3 AND expires_at > ` + sqliteNow,
		inspectSQL: `SELECT fence, owner, expires_at - ` + sqliteNow + `
FROM ` + t + ` WHERE key_hash = ?1 AND lock_key = ?2 AND expires_at > ` + sqliteNow,
	}
}

// sqliteMillis returns the row's lifetime for ttl: whole milliseconds rounded up,
// plus one for the truncation of SQLite's millisecond clock.
func sqliteMillis(ttl time.Duration) int64 {
	ms := ttl / time.Millisecond
	if ttl%time.Millisecond != 0 {
		ms++
	}
	return int64(ms) + 1
}

// acquire names no session: the driver runs the statement in this process, and the
// call returns only once the statement has committed or rolled back, so nothing of
// it can reach the database later (see the package doc).
func (d *sqliteDialect) acquire(ctx context.Context, kh, key, token []byte, ttl time.Duration) (int64, bool, session, error) {
	var fence int64
	err := d.db.QueryRowContext(ctx, d.acquireSQL, kh, key, token, sqliteMillis(ttl), d.owner).Scan(&fence)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, session{}, nil
	}
	if err != nil {
		return 0, false, session{}, err
	}
	return fence, true, session{}, nil
}

// endSession is never called: acquire names no session.
func (d *sqliteDialect) endSession(context.Context, session) error { return nil }

func (d *sqliteDialect) renew(ctx context.Context, kh, key, token []byte, ttl time.Duration) (bool, error) {
	res, err := d.db.ExecContext(ctx, d.renewSQL, kh, key, token, sqliteMillis(ttl))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (d *sqliteDialect) release(ctx context.Context, kh, key, token []byte) (bool, error) {
	res, err := d.db.ExecContext(ctx, d.releaseSQL, kh, key, token)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (d *sqliteDialect) inspect(ctx context.Context, kh, key []byte) (holder, bool, error) {
	var h holder
	var ms int64
	err := d.db.QueryRowContext(ctx, d.inspectSQL, kh, key).Scan(&h.fence, &h.owner, &ms)
	if errors.Is(err, sql.ErrNoRows) {
		return h, false, nil
	}
	if err != nil {
		return h, false, err
	}
	h.remaining = time.Duration(ms) * time.Millisecond
	return h, true, nil
}

func sqliteCode(err error) (int, bool) {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return 0, false
	}
	return se.Code() & 0xff, true // the primary result code
}

func (d *sqliteDialect) retryable(err error) bool {
	c, ok := sqliteCode(err)
	return ok && (c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED)
}

func (d *sqliteDialect) definite(err error) bool {
	c, ok := sqliteCode(err)
	// An interrupted statement (the context ended) is rolled back too, but it may
	// have been interrupted after it had finished: treat it as unknown.
	return ok && c != sqlite3.SQLITE_INTERRUPT
}
