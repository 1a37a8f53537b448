package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/calls"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// highWater is the key_hash of the high-water row (sqllock.HighWaterHash) as an
// SQL expression that does not depend on standard_conforming_strings.
var highWater = "decode('" + strings.Repeat("00", len(sqllock.HighWaterHash)) + "', 'hex')"

// heldSetting is the setting in which acquire marks a key held: a placeholder
// (custom) setting, set for the statement's transaction only.
const heldSetting = "distlock.held"

// statements are the SQL of one table.
type statements struct {
	create, highWater                    []string // the DDL: CREATE TABLE; INSERT of the high-water row
	acquire, insert, renew, release      string
	inspect                              string
	renewBatch                           string
	candidates, pruneLock, prune, listen string
	channel                              string // of the release notifications
	tableID                              int32  // the first key of the advisory locks of Waits (register.go)
}

func newStatements(table string) statements {
	t := sqllock.QuoteTable(table, '"')
	sum := sha256.Sum256([]byte(table))
	channel := "distlock_" + hex.EncodeToString(sum[:8])
	return statements{
		channel: channel,
		tableID: int32(binary.BigEndian.Uint32(sum[8:12])),
		listen:  "LISTEN " + pgx.Identifier{channel}.Sanitize(),
		create: []string{`CREATE TABLE IF NOT EXISTS ` + t + ` (
	key_hash bytea PRIMARY KEY,
	lock_key bytea NOT NULL,
	token bytea NOT NULL,
	fence bigint NOT NULL,
	expires_at timestamptz NOT NULL,
	owner text NOT NULL
)`},
		highWater: []string{`INSERT INTO ` + t + ` (key_hash, lock_key, token, fence, expires_at, owner)
VALUES (` + highWater + `, '', '', 0, 'epoch', '` + sqllock.HighWaterOwner + `')
ON CONFLICT (key_hash) DO NOTHING`},
		// CURRENT_TIMESTAMP (now()) is the start of the statement's transaction:
		// this statement alone. acquire takes the key's row over when it has
		// expired, its fence + 1 (the common case, which touches no other row),
		// and returns that fence. When the row it finds (the latest version: READ
		// COMMITTED rechecks a row that a concurrent statement changed) has not
		// expired, its last condition (which runs after the cheaper ones, as in
		// release: only on the key's own row) marks the key held in a setting
		// local to the statement's transaction, valued $6 (the token: no other
		// statement's value), and it returns 0; it returns -1 when it found no row
		// of the key, and then insert decides. Every node of a statement is set up
		// at each execution, run or not (callgrind, the server's instructions per
		// TryLock+Unlock): a second scan of the row that told a held key cost 8% of
		// them, the INSERT of insert, kept out of acquire, a fifth.
		acquire: `WITH u AS (
	UPDATE ` + t + ` SET token = $3, fence = fence + 1,
		expires_at = CURRENT_TIMESTAMP + $4::interval, owner = $5
	WHERE key_hash = $1 AND lock_key = $2
		AND (expires_at <= CURRENT_TIMESTAMP OR set_config('` + heldSetting + `', $6, true) IS NULL)
	RETURNING fence
)
SELECT COALESCE((SELECT fence FROM u), CASE current_setting('` + heldSetting + `', true) WHEN $6 THEN 0 ELSE -1 END)`,
		// insert is the whole acquire in one statement, u as in acquire. Only when
		// u took nothing and the statement's snapshot has no unexpired row of the
		// key (so that the key is not plainly held), i inserts a new row, whose
		// fence starts above the high-water mark, read under FOR KEY SHARE: Prune
		// takes FOR UPDATE on that row before it deletes, so an acquire either
		// finishes before Prune's transaction or reads the mark that it committed
		// (READ COMMITTED re-reads the locked row; stricter isolation fails with a
		// serialization error, which is retried). i is also the way back for a row
		// that Prune deleted while u waited for it; when another acquire took or
		// inserted the row meanwhile, i's ON CONFLICT DO NOTHING makes the
		// statement return nothing. (Locking the one high-water row in every
		// acquire serialized them all: 16 goroutines on distinct keys ran no
		// faster than one.)
		insert: `WITH u AS (
	UPDATE ` + t + ` SET token = $3, fence = fence + 1,
		expires_at = now() + $4::bigint * interval '1 microsecond', owner = $5
	WHERE key_hash = $1 AND lock_key = $2 AND expires_at <= now()
	RETURNING fence
), i AS (
	INSERT INTO ` + t + ` (key_hash, lock_key, token, fence, expires_at, owner)
	SELECT $1, $2, $3,
		COALESCE((SELECT h.fence FROM ` + t + ` h WHERE h.key_hash = ` + highWater + ` FOR KEY SHARE), 0) + 1,
		now() + $4::bigint * interval '1 microsecond', $5
	WHERE NOT EXISTS (SELECT FROM u)
		AND NOT EXISTS (SELECT FROM ` + t + ` k WHERE k.key_hash = $1 AND k.expires_at > now())
	ON CONFLICT (key_hash) DO NOTHING
	RETURNING fence
)
SELECT fence FROM u UNION ALL SELECT fence FROM i`,
		// GREATEST: a renewal never moves the expiry earlier (a shorter ttl whose
		// reply is lost must not cut the lease under its holder's old Expires).
		renew: `UPDATE ` + t + ` SET expires_at = GREATEST(expires_at, now() + $4::bigint * interval '1 microsecond')
WHERE key_hash = $1 AND lock_key = $2 AND token = $3 AND expires_at > now()`,
		// renew of many rows (no two with the same key_hash and token, so that each
		// row joins one element), returning the index of each renewed one.
		renewBatch: `UPDATE ` + t + ` AS t SET expires_at = GREATEST(t.expires_at, now() + v.us * interval '1 microsecond')
FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::bigint[]) WITH ORDINALITY AS v(h, k, tok, us, i)
WHERE t.key_hash = v.h AND t.lock_key = v.k AND t.token = v.tok AND t.expires_at > now()
RETURNING v.i`,
		// The last condition runs pg_try_advisory_xact_lock, and pg_notify when it
		// fails, for the row that the statement releases (the conditions before it
		// come first: PostgreSQL orders a row's conditions by cost, keeping the
		// written order among equals; a stray evaluation only costs a spurious
		// notification); the lock is held until the statement commits. The
		// notification, whose payload encode(key_hash, 'hex') is payload(key), is
		// delivered when the statement commits. It notifies only when a Wait has
		// registered the key (register.go). (In RETURNING it cost 4% of the
		// server's instructions per TryLock+Unlock more: the returned row.)
		release: `UPDATE ` + t + ` SET expires_at = CURRENT_TIMESTAMP
WHERE key_hash = $1 AND lock_key = $2 AND token = $3 AND expires_at > CURRENT_TIMESTAMP
	AND (pg_try_advisory_xact_lock($4::int4, $5::int4) OR pg_notify('` + channel + `', encode($1, 'hex')) IS NOT NULL)`,
		inspect: `SELECT fence, owner, (EXTRACT(EPOCH FROM expires_at - now()) * 1000000)::bigint
FROM ` + t + ` WHERE key_hash = $1 AND lock_key = $2 AND expires_at > now()`,
		candidates: `SELECT key_hash FROM ` + t + `
WHERE key_hash > $1 AND expires_at < now() - $2::bigint * interval '1 microsecond'
ORDER BY key_hash LIMIT $3`,
		pruneLock: `SELECT fence FROM ` + t + ` WHERE key_hash = ` + highWater + ` FOR UPDATE`,
		prune: `WITH d AS (
	DELETE FROM ` + t + `
	WHERE key_hash > $1 AND key_hash <= $2 AND expires_at < now() - $3::bigint * interval '1 microsecond'
	RETURNING fence
)
UPDATE ` + t + ` SET fence = GREATEST(fence, (SELECT max(fence) FROM d))
WHERE key_hash = ` + highWater + `
RETURNING (SELECT count(*) FROM d)`,
	}
}

// ddl returns the statements that create the table and its high-water row.
func (s statements) ddl() []string { return append(append([]string(nil), s.create...), s.highWater...) }

// dialect runs the statements of one table on a pool.
type dialect struct {
	pool  *pgxpool.Pool
	owner any // string, boxed once: a statement's arguments are interfaces
	sql   statements
	table any // sql.tableID, boxed once
}

func newDialect(pool *pgxpool.Pool, owner, table string) *dialect {
	sql := newStatements(table)
	return &dialect{pool: pool, owner: owner, sql: sql, table: sql.tableID}
}

var (
	_ sqllock.Dialect      = (*dialect)(nil)
	_ sqllock.BatchRenewer = (*dialect)(nil)
)

// sessionKey is where a connection's session is kept in its PgConn.CustomData.
const sessionKey = "github.com/distlock/distlock/sqllock/postgres.session"

// sessionSQL names the connection's own session; endSQL terminates a session (the
// same pid and start) and waits up to $3 ms until it has exited. It returns no row
// when the session is gone, and false (with a warning) while it is still there.
// The two-argument pg_terminate_backend needs PostgreSQL 14.
const (
	sessionSQL = `SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()`
	endSQL     = `SELECT pg_terminate_backend(pid, $3) FROM pg_stat_activity WHERE pid = $1 AND backend_start = $2`
	endWaitMS  = 1000
)

// setup creates the table unless skip is set, and adds its high-water row.
func (d *dialect) setup(ctx context.Context, skip bool) error {
	if !skip {
		for _, q := range d.sql.create {
			if err := d.exec(ctx, q); err != nil {
				return fmt.Errorf("create table: %w", err)
			}
		}
	}
	for _, q := range d.sql.highWater {
		if err := d.exec(ctx, q); err != nil {
			return fmt.Errorf("add the high-water row: %w", err)
		}
	}
	return nil
}

// exec runs q, retrying the collisions of concurrent CREATE TABLE IF NOT EXISTS in
// the catalog (unique_violation, duplicate_table, duplicate_object: the table's row
// type): the second then finds the table.
func (d *dialect) exec(ctx context.Context, q string) error {
	return calls.Retry(ctx, func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "42P07" || pe.Code == "42710") || d.Retryable(err)
	}, func() error {
		_, err := d.pool.Exec(ctx, q)
		return err
	})
}

func (d *dialect) Acquire(ctx context.Context, r sqllock.Row, ttl time.Duration) (int64, bool, sqllock.Session, error) {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		return 0, false, sqllock.Session{}, sqllock.NotSent(err)
	}
	defer c.Release()
	sess, err := d.session(ctx, c)
	if err != nil {
		return 0, false, sqllock.Session{}, sqllock.NotSent(err)
	}
	// One interface value for both uses of the token, and a non-NULL result:
	// each saves a client allocation.
	tok := any(r.Token)
	us := calls.Micros(ttl)
	var got int64
	err = c.QueryRow(ctx, d.sql.acquire, r.Hash, r.Key, tok, pgtype.Interval{Microseconds: us, Valid: true}, d.owner, tok).Scan(&got)
	switch {
	case err != nil:
		return 0, false, sess, err
	case got > 0:
		return got, true, sess, nil
	case got == 0:
		return 0, false, sess, nil // held
	}
	// No row (the key's first acquire, or Prune deleted it meanwhile): insert
	// decides.
	var fence int64
	err = c.QueryRow(ctx, d.sql.insert, r.Hash, r.Key, r.Token, us, d.owner).Scan(&fence)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, sess, nil
	}
	if err != nil {
		return 0, false, sess, err
	}
	return fence, true, sess, nil
}

// session returns the session of c, asked once per connection and kept in its
// CustomData. It is zero (cannot be ended) when the server's pid is not the one
// the connection reported at startup: a pooler such as PgBouncer is in between,
// and the session may serve other clients.
func (d *dialect) session(ctx context.Context, c *pgxpool.Conn) (sqllock.Session, error) {
	pc := c.Conn().PgConn()
	if s, ok := pc.CustomData()[sessionKey].(sqllock.Session); ok {
		return s, nil
	}
	var pid int32
	var start time.Time
	err := c.QueryRow(ctx, sessionSQL).Scan(&pid, &start)
	var s sqllock.Session
	switch {
	case err == nil && uint32(pid) == pc.PID():
		s = sqllock.Session{ID: int64(pid), Start: start}
	case err == nil, errors.Is(err, pgx.ErrNoRows):
	default:
		return sqllock.Session{}, err
	}
	pc.CustomData()[sessionKey] = s
	return s, nil
}

func (d *dialect) EndSession(ctx context.Context, s sqllock.Session) error {
	var ended bool
	err := d.pool.QueryRow(ctx, endSQL, int32(s.ID), s.Start, int64(endWaitMS)).Scan(&ended)
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil // gone
	case errors.As(err, &pe):
		return fmt.Errorf("%w %d: %w", sqllock.ErrCannotEnd, s.ID, err)
	case err != nil:
		return err
	case !ended:
		return sqllock.ErrSessionLive // or exited just before the call: the next look tells
	}
	return nil
}

func (d *dialect) Renew(ctx context.Context, r sqllock.Row, ttl time.Duration) (bool, error) {
	tag, err := d.pool.Exec(ctx, d.sql.renew, r.Hash, r.Key, r.Token, calls.Micros(ttl))
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// RenewBatch renews rs in one statement (sqllock.BatchRenewer).
func (d *dialect) RenewBatch(ctx context.Context, rs []sqllock.Row, ttls []time.Duration) ([]bool, error) {
	hs, ks, ts := make([][]byte, len(rs)), make([][]byte, len(rs)), make([][]byte, len(rs))
	us := make([]int64, len(rs))
	for i, r := range rs {
		hs[i], ks[i], ts[i], us[i] = r.Hash, r.Key, r.Token, calls.Micros(ttls[i])
	}
	rows, err := d.pool.Query(ctx, d.sql.renewBatch, hs, ks, ts, us)
	if err != nil {
		return nil, err
	}
	renewed, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	held := make([]bool, len(rs))
	for _, i := range renewed {
		if i < 1 || i > int64(len(rs)) {
			return nil, fmt.Errorf("renew: the database returned row %d of %d", i, len(rs))
		}
		held[i-1] = true
	}
	return held, nil
}

func (d *dialect) Release(ctx context.Context, r sqllock.Row) (bool, error) {
	tag, err := d.pool.Exec(ctx, d.sql.release, r.Hash, r.Key, r.Token, d.table, keyID(r.Hash))
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

func (d *dialect) Inspect(ctx context.Context, r sqllock.Row) (sqllock.RowState, bool, error) {
	var st sqllock.RowState
	var us int64
	err := d.pool.QueryRow(ctx, d.sql.inspect, r.Hash, r.Key).Scan(&st.Fence, &st.Owner, &us)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, false, nil
	}
	if err != nil {
		return st, false, err
	}
	st.Remaining = time.Duration(us) * time.Microsecond
	return st, true, nil
}

func (d *dialect) Prune(ctx context.Context, after []byte, olderThan time.Duration, limit int) (int64, []byte, error) {
	rows, err := d.pool.Query(ctx, d.sql.candidates, after, calls.Micros(olderThan), limit)
	if err != nil {
		return 0, nil, err
	}
	hashes, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil || len(hashes) == 0 {
		return 0, nil, err
	}
	last := hashes[len(hashes)-1]
	var n int64
	err = pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		var hw int64
		if err := tx.QueryRow(ctx, d.sql.pruneLock).Scan(&hw); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return errNoHighWater
			}
			return err
		}
		return tx.QueryRow(ctx, d.sql.prune, after, last, calls.Micros(olderThan)).Scan(&n)
	})
	if err != nil {
		return 0, nil, err
	}
	return n, last, nil
}

// keyID is the second key of the advisory lock by which Waits register key_hash.
func keyID(hash []byte) int32 { return int32(binary.BigEndian.Uint32(hash)) }

// errNoHighWater: the table has lost its high-water row.
var errNoHighWater = errors.New("the table has no fence high-water row (New adds it): pruning would let fences repeat")

func (d *dialect) Retryable(err error) bool {
	var pe *pgconn.PgError
	// serialization_failure, deadlock_detected
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

func (d *dialect) Definite(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) || pgconn.SafeToRetry(err)
}
