package sqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/distlock/distlock"
	"github.com/go-sql-driver/mysql"
)

// NewMySQL returns a Locker whose leases are rows of an InnoDB table in the MySQL (8.0
// or later) or MariaDB (10.5 or later) database that db connects to (driver
// github.com/go-sql-driver/mysql), and creates the table if it is missing. The DSN
// must name a database. db must stay open while the Locker is used; the Locker does
// not close it. Setting interpolateParams=true in the DSN saves a round trip per
// call.
//
// Acquire is one INSERT ... ON DUPLICATE KEY UPDATE statement that takes the row over
// only when it has expired by the database's UTC_TIMESTAMP(6) (so the sessions' time
// zones do not matter); it reports the new fence through LAST_INSERT_ID(expr), which
// does not depend on the DSN's clientFoundRows setting. The Locker has no Wait:
// distlock.Lock polls with backoff.
func NewMySQL(ctx context.Context, db *sql.DB, opts *Options) (*Locker, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: NewMySQL: nil *sql.DB", distlock.ErrInvalid)
	}
	r, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	d := newMySQLDialect(db, r)
	if _, err := db.ExecContext(ctx, d.create); err != nil {
		return nil, fmt.Errorf("sqllock: create table %s: %w", r.name(), err)
	}
	return newLocker(d, r), nil
}

type mysqlDialect struct {
	db                                                   *sql.DB
	ids                                                  connIDs
	owner                                                string
	create, acquireSQL, renewSQL, releaseSQL, inspectSQL string
	heldSQL                                              string
}

func newMySQLDialect(db *sql.DB, r resolved) *mysqlDialect {
	t := r.quoted("`")
	// won is the takeover condition. It is repeated in each assignment, and
	// expires_at is assigned last: MySQL evaluates the assignments left to right and
	// later ones see the new values (MariaDB too, unless SIMULTANEOUS_ASSIGNMENT is
	// set, which gives the same result with this order).
	const won = `(expires_at <= UTC_TIMESTAMP(6) AND lock_key = ?)`
	return &mysqlDialect{
		db:    db,
		owner: r.owner,
		create: `CREATE TABLE IF NOT EXISTS ` + t + ` (
	key_hash BINARY(32) NOT NULL PRIMARY KEY,
	lock_key MEDIUMBLOB NOT NULL,
	token VARBINARY(255) NOT NULL,
	fence BIGINT NOT NULL,
	expires_at DATETIME(6) NOT NULL,
	owner VARCHAR(255) CHARACTER SET utf8mb4 NOT NULL
) ENGINE=InnoDB`,
		// LAST_INSERT_ID(expr) sets the insert id that the OK packet reports: 1 for
		// a new row (the VALUES are evaluated first), the new fence for a takeover,
		// and 0 (reset by LAST_INSERT_ID(0)) when the row is held.
		acquireSQL: `INSERT INTO ` + t + ` (key_hash, lock_key, token, fence, expires_at, owner)
VALUES (?, ?, ?, LAST_INSERT_ID(1), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, ?)
ON DUPLICATE KEY UPDATE
	token = IF(` + won + `, ?, token),
	owner = IF(` + won + `, ?, owner),
	fence = IF(` + won + `, LAST_INSERT_ID(fence + 1), fence + LAST_INSERT_ID(0)),
	expires_at = IF(` + won + `, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, expires_at)`,
		// GREATEST: a renewal never moves the expiry earlier (a shorter ttl whose
		// reply is lost must not cut the lease under its holder's old Expires).
		renewSQL: `UPDATE ` + t + ` SET expires_at = GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
WHERE key_hash = ? AND lock_key = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)`,
		releaseSQL: `UPDATE ` + t + ` SET expires_at = UTC_TIMESTAMP(6)
WHERE key_hash = ? AND lock_key = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)`,
		inspectSQL: `SELECT fence, owner, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
FROM ` + t + ` WHERE key_hash = ? AND lock_key = ? AND expires_at > UTC_TIMESTAMP(6)`,
		heldSQL: `SELECT COUNT(*) FROM ` + t + `
WHERE key_hash = ? AND lock_key = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)`,
	}
}

func (d *mysqlDialect) acquire(ctx context.Context, kh, key, token []byte, ttl time.Duration) (int64, bool, session, error) {
	c, err := d.db.Conn(ctx)
	if err != nil {
		return 0, false, session{}, notSent(err)
	}
	defer c.Close()
	cid, err := d.ids.of(ctx, c)
	if err != nil {
		return 0, false, session{}, notSent(err)
	}
	sess := session{id: cid}
	us := micros(ttl)
	res, err := c.ExecContext(ctx, d.acquireSQL,
		kh, key, token, us, d.owner,
		key, token,
		key, d.owner,
		key,
		key, us)
	if err != nil {
		return 0, false, sess, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, false, sess, err
	}
	return id, id > 0, sess, nil
}

// endSession kills the connection (KILL only flags it), then looks whether the
// process list still shows it: a connection leaves the list after its transaction
// has been rolled back or committed. A user may kill its own connections without
// any privilege.
func (d *mysqlDialect) endSession(ctx context.Context, s session) error {
	_, err := d.db.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(s.id, 10))
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me) && me.Number == 1094: // ER_NO_SUCH_THREAD: gone
		return nil
	case errors.As(err, &me):
		return fmt.Errorf("%w %d: %w", errCannotEnd, s.id, err)
	case err != nil:
		return err
	}
	var n int
	if err := d.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?`, s.id).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return errSessionLive
	}
	return nil
}

func (d *mysqlDialect) renew(ctx context.Context, kh, key, token []byte, ttl time.Duration) (bool, error) {
	res, err := d.db.ExecContext(ctx, d.renewSQL, micros(ttl), kh, key, token)
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
	// within a microsecond) counts as not affected: look whether token holds it.
	var held int
	if err := d.db.QueryRowContext(ctx, d.heldSQL, kh, key, token).Scan(&held); err != nil {
		return false, err
	}
	return held == 1, nil
}

func (d *mysqlDialect) release(ctx context.Context, kh, key, token []byte) (bool, error) {
	// expires_at only moves back, so a released row always counts as affected.
	res, err := d.db.ExecContext(ctx, d.releaseSQL, kh, key, token)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

func (d *mysqlDialect) inspect(ctx context.Context, kh, key []byte) (holder, bool, error) {
	var h holder
	var us int64
	err := d.db.QueryRowContext(ctx, d.inspectSQL, kh, key).Scan(&h.fence, &h.owner, &us)
	if errors.Is(err, sql.ErrNoRows) {
		return h, false, nil
	}
	if err != nil {
		return h, false, err
	}
	h.remaining = time.Duration(us) * time.Microsecond
	return h, true, nil
}

func (d *mysqlDialect) retryable(err error) bool {
	var me *mysql.MySQLError
	// ER_LOCK_DEADLOCK; ER_CHECKREAD (a snapshot read conflict)
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1020)
}

func (d *mysqlDialect) definite(err error) bool {
	var me *mysql.MySQLError
	// The driver returns driver.ErrBadConn only when it sent nothing.
	return errors.As(err, &me) || errors.Is(err, driver.ErrBadConn)
}
