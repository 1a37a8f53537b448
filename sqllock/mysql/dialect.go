package mysql

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/sqllock/sqldialect"

	gomysql "github.com/go-sql-driver/mysql"
)

// highWater is the key_hash of the high-water row (sqldialect.HighWaterHash) as an SQL
// literal.
var highWater = "X'" + strings.Repeat("00", len(sqldialect.HighWaterHash)) + "'"

// statements are the SQL of one table.
type statements struct {
	table                                              string   // the quoted name
	create, highWater                                  []string // the DDL: CREATE TABLE; INSERT of the high-water row
	takeover, acquire, renew, release, inspect, held   string
	candidates, pruneLock, pruneMax, pruneRaise, prune string
}

// cutoff is the database's now minus the bound olderThan, in microseconds.
const cutoff = `UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND`

func newStatements(table string) statements {
	t := sqldialect.QuoteTable(table, '`')
	// won is the takeover condition. It is repeated in each assignment, and
	// expires_at is assigned last: MySQL evaluates the assignments left to right and
	// later ones see the new values (MariaDB too, unless SIMULTANEOUS_ASSIGNMENT is
	// set, which gives the same result with this order).
	const won = `(expires_at <= UTC_TIMESTAMP(6) AND lock_key = ?)`
	candidate := `key_hash > ? AND key_hash <= ? AND expires_at < ` + cutoff
	return statements{
		table: t,
		create: []string{`CREATE TABLE IF NOT EXISTS ` + t + ` (
	key_hash BINARY(32) NOT NULL PRIMARY KEY,
	lock_key MEDIUMBLOB NOT NULL,
	token VARBINARY(255) NOT NULL,
	fence BIGINT NOT NULL,
	expires_at DATETIME(6) NOT NULL,
	owner VARCHAR(255) CHARACTER SET utf8mb4 NOT NULL
) ENGINE=InnoDB`},
		highWater: []string{`INSERT INTO ` + t + ` (key_hash, lock_key, token, fence, expires_at, owner)
VALUES (` + highWater + `, '', '', 0, '1970-01-01 00:00:00', '` + sqldialect.HighWaterOwner + `')
ON DUPLICATE KEY UPDATE key_hash = key_hash`},
		// takeover takes an expired row over (expires_at is assigned last, and the
		// WHERE is evaluated before any assignment): the common case, cheaper than
		// acquire's INSERT, and without its shared lock on the high-water row. When
		// it changes no row (the key has none, or it is held) acquire runs.
		takeover: `UPDATE ` + t + ` SET token = ?, owner = ?, fence = LAST_INSERT_ID(fence + 1),
	expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
WHERE key_hash = ? AND lock_key = ? AND expires_at <= UTC_TIMESTAMP(6)`,
		// LAST_INSERT_ID(expr) sets the insert id that the OK packet reports: the
		// new fence for a new row (the VALUES are evaluated first) or a takeover,
		// and 0 (reset by LAST_INSERT_ID(0)) when the row is held. A new row's
		// fence starts above the high-water mark, read with a shared lock: Prune
		// locks that row for update before it deletes, so an acquire either
		// finishes before Prune's transaction or reads the mark that it committed
		// (a locking read sees the latest version).
		acquire: `INSERT INTO ` + t + ` (key_hash, lock_key, token, fence, expires_at, owner)
VALUES (?, ?, ?,
	LAST_INSERT_ID(COALESCE((SELECT h.fence FROM ` + t + ` h WHERE h.key_hash = ` + highWater + ` LOCK IN SHARE MODE), 0) + 1),
	UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, ?)
ON DUPLICATE KEY UPDATE
	token = IF(` + won + `, ?, token),
	owner = IF(` + won + `, ?, owner),
	fence = IF(` + won + `, LAST_INSERT_ID(fence + 1), fence + LAST_INSERT_ID(0)),
	expires_at = IF(` + won + `, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, expires_at)`,
		// GREATEST: a renewal never moves the expiry earlier (a shorter ttl whose
		// reply is lost must not cut the lease under its holder's old Expires).
		renew: `UPDATE ` + t + ` SET expires_at = GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
WHERE key_hash = ? AND lock_key = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)`,
		release: `UPDATE ` + t + ` SET expires_at = UTC_TIMESTAMP(6)
WHERE key_hash = ? AND lock_key = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)`,
		inspect: `SELECT fence, owner, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
FROM ` + t + ` WHERE key_hash = ? AND lock_key = ? AND expires_at > UTC_TIMESTAMP(6)`,
		held: `SELECT COUNT(*) FROM ` + t + `
WHERE key_hash = ? AND lock_key = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)`,
		candidates: `SELECT key_hash FROM ` + t + ` WHERE key_hash > ? AND expires_at < ` + cutoff + `
ORDER BY key_hash LIMIT ?`,
		pruneLock:  `SELECT fence FROM ` + t + ` WHERE key_hash = ` + highWater + ` FOR UPDATE`,
		pruneMax:   `SELECT COALESCE(MAX(fence), 0) FROM ` + t + ` WHERE ` + candidate + ` FOR UPDATE`,
		pruneRaise: `UPDATE ` + t + ` SET fence = ? WHERE key_hash = ` + highWater,
		// fence <= the new mark: a row whose expiry passed the cutoff between the
		// two statements is left for the next Prune.
		prune: `DELETE FROM ` + t + ` WHERE ` + candidate + ` AND fence <= ?`,
	}
}

// ddl returns the statements that create the table and its high-water row.
func (s statements) ddl() []string { return append(append([]string(nil), s.create...), s.highWater...) }

// dialect runs the statements of one table on a *sql.DB.
type dialect struct {
	db    *sql.DB
	ids   connIDs
	owner string
	sql   statements
}

var _ sqldialect.Dialect = (*dialect)(nil)

// setup creates the table unless skip is set, and adds its high-water row.
func (d *dialect) setup(ctx context.Context, skip bool) error {
	if !skip {
		for _, q := range d.sql.create {
			if _, err := d.db.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("create table: %w", err)
			}
		}
	}
	for _, q := range d.sql.highWater {
		err := driver.Retry(ctx, d.Retryable, func() error {
			_, err := d.db.ExecContext(ctx, q)
			return err
		})
		if err != nil {
			return fmt.Errorf("add the high-water row: %w", err)
		}
	}
	return nil
}

func (d *dialect) Acquire(ctx context.Context, r sqldialect.Row, ttl time.Duration) (int64, bool, sqldialect.Session, error) {
	c, err := d.db.Conn(ctx)
	if err != nil {
		return 0, false, sqldialect.Session{}, driver.NotSent(err)
	}
	defer c.Close()
	cid, err := d.ids.of(ctx, c)
	if err != nil {
		return 0, false, sqldialect.Session{}, driver.NotSent(err)
	}
	sess := sqldialect.Session{ID: cid}
	us := sqldialect.Micros(ttl)
	res, err := c.ExecContext(ctx, d.sql.takeover, r.Token, d.owner, us, r.Hash, r.Key)
	if err != nil {
		return 0, false, sess, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		id, ierr := res.LastInsertId()
		if err = errors.Join(err, ierr); err != nil {
			return 0, false, sess, err
		}
		return id, true, sess, nil
	}
	res, err = c.ExecContext(ctx, d.sql.acquire,
		r.Hash, r.Key, r.Token, us, d.owner,
		r.Key, r.Token,
		r.Key, d.owner,
		r.Key,
		r.Key, us)
	if err != nil {
		return 0, false, sess, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, false, sess, err
	}
	return id, id > 0, sess, nil
}

// EndSession kills the connection (KILL only flags it), then looks whether the
// process list still shows it: a connection leaves the list after its transaction
// has been rolled back or committed. A user may kill its own connections without
// any privilege.
func (d *dialect) EndSession(ctx context.Context, s sqldialect.Session) error {
	_, err := d.db.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(s.ID, 10))
	var me *gomysql.MySQLError
	switch {
	case errors.As(err, &me) && me.Number == 1094: // ER_NO_SUCH_THREAD: gone
		return nil
	case errors.As(err, &me):
		return fmt.Errorf("%w %d: %w", sqldialect.ErrCannotEnd, s.ID, err)
	case err != nil:
		return err
	}
	var n int
	if err := d.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?`, s.ID).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return sqldialect.ErrSessionLive
	}
	return nil
}

func (d *dialect) Renew(ctx context.Context, r sqldialect.Row, ttl time.Duration) (bool, error) {
	res, err := d.db.ExecContext(ctx, d.sql.renew, sqldialect.Micros(ttl), r.Hash, r.Key, r.Token)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	if n == 1 {
		return true, nil
	}
	// Without clientFoundRows, a row whose expires_at did not change (renewed twice
	// within a microsecond, or with a shorter ttl) counts as not affected: look
	// whether the token holds it.
	var held int
	if err := d.db.QueryRowContext(ctx, d.sql.held, r.Hash, r.Key, r.Token).Scan(&held); err != nil {
		return false, err
	}
	return held == 1, nil
}

func (d *dialect) Release(ctx context.Context, r sqldialect.Row) (bool, error) {
	// expires_at only moves back, so a released row always counts as affected.
	res, err := d.db.ExecContext(ctx, d.sql.release, r.Hash, r.Key, r.Token)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

func (d *dialect) Inspect(ctx context.Context, r sqldialect.Row) (sqldialect.RowState, bool, error) {
	var st sqldialect.RowState
	var us int64
	err := d.db.QueryRowContext(ctx, d.sql.inspect, r.Hash, r.Key).Scan(&st.Fence, &st.Owner, &us)
	if errors.Is(err, sql.ErrNoRows) {
		return st, false, nil
	}
	if err != nil {
		return st, false, err
	}
	st.Remaining = time.Duration(us) * time.Microsecond
	return st, true, nil
}

func (d *dialect) Prune(ctx context.Context, after []byte, olderThan time.Duration, limit int) (int64, []byte, error) {
	us := sqldialect.Micros(olderThan)
	rows, err := d.db.QueryContext(ctx, d.sql.candidates, after, us, limit)
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
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, nil, err
	}
	defer tx.Rollback()
	var hw, top int64
	if err := tx.QueryRowContext(ctx, d.sql.pruneLock).Scan(&hw); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0, nil, errNoHighWater
		}
		return 0, nil, err
	}
	if err := tx.QueryRowContext(ctx, d.sql.pruneMax, after, last, us).Scan(&top); err != nil {
		return 0, nil, err
	}
	hw = max(hw, top)
	if _, err := tx.ExecContext(ctx, d.sql.pruneRaise, hw); err != nil {
		return 0, nil, err
	}
	res, err := tx.ExecContext(ctx, d.sql.prune, after, last, us, hw)
	if err != nil {
		return 0, nil, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, nil, err
	}
	if err := tx.Commit(); err != nil {
		return 0, nil, err
	}
	return n, last, nil
}

// errNoHighWater: the table has lost its high-water row.
var errNoHighWater = errors.New("the table has no fence high-water row (New adds it): pruning would let fences repeat")

func (d *dialect) Retryable(err error) bool {
	var me *gomysql.MySQLError
	// ER_LOCK_DEADLOCK; ER_CHECKREAD (a snapshot read conflict)
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1020)
}

func (d *dialect) Definite(err error) bool {
	var me *gomysql.MySQLError
	// The driver returns driver.ErrBadConn only when it sent nothing.
	return errors.As(err, &me) || errors.Is(err, sqldriver.ErrBadConn)
}
