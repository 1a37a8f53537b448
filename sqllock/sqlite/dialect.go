package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/distlock/distlock/sqllock/sqldialect"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// now is the database's clock in whole milliseconds since the Unix epoch. SQLite
// reads the clock once per statement step, in milliseconds.
const now = `CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER)`

// highWater is the key_hash of the high-water row (sqldialect.HighWaterHash) as an SQL
// literal.
var highWater = "X'" + strings.Repeat("00", len(sqldialect.HighWaterHash)) + "'"

// statements are the SQL of one table.
type statements struct {
	table                            string   // the quoted name
	create, highWater                []string // the DDL: CREATE TABLE; INSERT of the high-water row
	acquire, renew, release, inspect string
	candidates, pruneRaise, prune    string
}

func newStatements(table string) statements {
	t := sqldialect.QuoteTable(table, '"')
	candidate := `key_hash > ?1 AND key_hash <= ?2 AND expires_at < ` + now + ` - ?3`
	return statements{
		table: t,
		create: []string{`CREATE TABLE IF NOT EXISTS ` + t + ` (
	key_hash BLOB NOT NULL PRIMARY KEY,
	lock_key BLOB NOT NULL,
	token BLOB NOT NULL,
	fence INTEGER NOT NULL,
	expires_at INTEGER NOT NULL, -- milliseconds since the Unix epoch
	owner TEXT NOT NULL
) WITHOUT ROWID`},
		highWater: []string{`INSERT INTO ` + t + ` (key_hash, lock_key, token, fence, expires_at, owner)
VALUES (` + highWater + `, X'', X'', 0, 0, '` + sqldialect.HighWaterOwner + `')
ON CONFLICT (key_hash) DO NOTHING`},
		// In DO UPDATE, bare column names are the existing row's. A new row's fence
		// starts above the high-water mark; SQLite runs one writer at a time, so
		// Prune's transaction and this statement never interleave.
		acquire: `INSERT INTO ` + t + ` (key_hash, lock_key, token, fence, expires_at, owner)
VALUES (?1, ?2, ?3, COALESCE((SELECT h.fence FROM ` + t + ` h WHERE h.key_hash = ` + highWater + `), 0) + 1, ` + now + ` + ?4, ?5)
ON CONFLICT (key_hash) DO UPDATE
SET token = excluded.token, fence = fence + 1, expires_at = excluded.expires_at, owner = excluded.owner
WHERE expires_at <= ` + now + ` AND lock_key = excluded.lock_key
RETURNING fence`,
		// max: a renewal never moves the expiry earlier.
		renew: `UPDATE ` + t + ` SET expires_at = max(expires_at, ` + now + ` + ?4)
WHERE key_hash = ?1 AND lock_key = ?2 AND token = ?3 AND expires_at > ` + now,
		release: `UPDATE ` + t + ` SET expires_at = ` + now + `
WHERE key_hash = ?1 AND lock_key = ?2 AND token = ?3 AND expires_at > ` + now,
		inspect: `SELECT fence, owner, expires_at - ` + now + `
FROM ` + t + ` WHERE key_hash = ?1 AND lock_key = ?2 AND expires_at > ` + now,
		candidates: `SELECT key_hash FROM ` + t + ` WHERE key_hash > ?1 AND expires_at < ` + now + ` - ?2
ORDER BY key_hash LIMIT ?3`,
		pruneRaise: `UPDATE ` + t + `
SET fence = max(fence, COALESCE((SELECT max(fence) FROM ` + t + ` WHERE ` + candidate + `), 0))
WHERE key_hash = ` + highWater,
		// fence <= the mark: a row whose expiry passed the cutoff between the two
		// statements is left for the next Prune.
		prune: `DELETE FROM ` + t + ` WHERE ` + candidate + `
AND fence <= (SELECT fence FROM ` + t + ` WHERE key_hash = ` + highWater + `)`,
	}
}

// ddl returns the statements that create the table and its high-water row.
func (s statements) ddl() []string { return append(append([]string(nil), s.create...), s.highWater...) }

// millis returns the row's lifetime for ttl: whole milliseconds rounded up, plus
// one for the truncation of SQLite's millisecond clock.
func millis(ttl time.Duration) int64 {
	ms := ttl / time.Millisecond
	if ttl%time.Millisecond != 0 {
		ms++
	}
	return int64(ms) + 1
}

// dialect runs the statements of one table on a *sql.DB.
type dialect struct {
	db    *sql.DB
	owner string
	sql   statements
	gate  *gate // of db: the writing statements run one at a time
}

var _ sqldialect.Dialect = (*dialect)(nil)

// Acquire names no session: the driver runs the statement in this process, in a
// group commit of the gate. A call that returned before its group commit ended
// (its context ended) is followed by the cleanup's release, which the gate runs in
// a later group commit, so nothing of the acquire can reach the database after it
// (see the package doc).
func (d *dialect) Acquire(ctx context.Context, r sqldialect.Row, ttl time.Duration) (int64, bool, sqldialect.Session, error) {
	var fence int64
	err := d.gate.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		err := c.QueryRowContext(ctx, d.sql.acquire, r.Hash, r.Key, r.Token, millis(ttl), d.owner).Scan(&fence)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // held: fence stays 0 (a failed statement would stop the batch)
		}
		return err
	})
	if err == nil && fence == 0 {
		return 0, false, sqldialect.Session{}, nil
	}
	if err != nil {
		return 0, false, sqldialect.Session{}, err
	}
	return fence, true, sqldialect.Session{}, nil
}

// EndSession is never called: Acquire names no session.
func (d *dialect) EndSession(context.Context, sqldialect.Session) error { return nil }

func (d *dialect) Renew(ctx context.Context, r sqldialect.Row, ttl time.Duration) (bool, error) {
	return d.update(ctx, d.sql.renew, r.Hash, r.Key, r.Token, millis(ttl))
}

func (d *dialect) Release(ctx context.Context, r sqldialect.Row) (bool, error) {
	return d.update(ctx, d.sql.release, r.Hash, r.Key, r.Token)
}

// update runs q in the gate's next batch and reports whether it changed one row.
func (d *dialect) update(ctx context.Context, q string, args ...any) (bool, error) {
	var n int64
	err := d.gate.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		res, err := c.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		// n is not ours to read: a caller whose ctx ended while its statement ran
		// returns before the statement sets it.
		return false, err
	}
	return n == 1, nil
}

func (d *dialect) Inspect(ctx context.Context, r sqldialect.Row) (sqldialect.RowState, bool, error) {
	var st sqldialect.RowState
	var ms int64
	err := d.db.QueryRowContext(ctx, d.sql.inspect, r.Hash, r.Key).Scan(&st.Fence, &st.Owner, &ms)
	if errors.Is(err, sql.ErrNoRows) {
		return st, false, nil
	}
	if err != nil {
		return st, false, err
	}
	st.Remaining = time.Duration(ms) * time.Millisecond
	return st, true, nil
}

func (d *dialect) Prune(ctx context.Context, after []byte, olderThan time.Duration, limit int) (int64, []byte, error) {
	ms := olderThan.Milliseconds()
	rows, err := d.db.QueryContext(ctx, d.sql.candidates, after, ms, limit)
	if err != nil {
		return 0, nil, err
	}
	var last []byte
	for rows.Next() {
		if err := rows.Scan(&last); err != nil {
			rows.Close()
			return 0, nil, err
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil || last == nil {
		return 0, nil, err
	}
	var n int64
	err = d.gate.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		res, err := c.ExecContext(ctx, d.sql.pruneRaise, after, last, ms)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return errors.Join(err, errNoHighWater)
		}
		if res, err = c.ExecContext(ctx, d.sql.prune, after, last, ms); err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	return n, last, nil
}

// errNoHighWater: the table has lost its high-water row.
var errNoHighWater = errors.New("the table has no fence high-water row (New adds it): pruning would let fences repeat")

func code(err error) (int, bool) {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return 0, false
	}
	return se.Code() & 0xff, true // the primary result code
}

func (d *dialect) Retryable(err error) bool {
	if errors.Is(err, errNotRun) {
		return true
	}
	c, ok := code(err)
	return ok && (c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED)
}

func (d *dialect) Definite(err error) bool {
	if errors.Is(err, errNotRun) {
		return true
	}
	c, ok := code(err)
	// An interrupted statement (the context ended) is rolled back too, but it may
	// have been interrupted after it had finished: treat it as unknown.
	return ok && c != sqlite3.SQLITE_INTERRUPT
}
