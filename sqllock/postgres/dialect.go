package postgres

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
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
	acquireBatch, releaseBatch           string
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
		// acquire of many rows (distinct key_hash, sorted), each as in acquire:
		// the fence of each row it took over; of the others, 0 when the
		// statement's snapshot has the key's row unexpired (held), -1 when it has
		// none, or an expired one that the UPDATE did not take (a concurrent
		// acquire took it meanwhile): then insert decides, for that row alone.
		// key_hash = ANY($1) makes the plan look the rows up by the primary key
		// (in key_hash order) whatever the table's statistics say (with few
		// unexpired rows the planner would scan the table), and the held rows are
		// looked up by a scalar subquery, which is never hashed into a scan of the
		// table.
		acquireBatch: `WITH v AS (
	SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::bigint[]) WITH ORDINALITY AS v(h, k, tok, us, i)
), u AS (
	UPDATE ` + t + ` AS t SET token = v.tok, fence = t.fence + 1,
		expires_at = CURRENT_TIMESTAMP + v.us * interval '1 microsecond', owner = $5
	FROM v
	WHERE t.key_hash = ANY($1::bytea[]) AND t.key_hash = v.h AND t.lock_key = v.k AND t.expires_at <= CURRENT_TIMESTAMP
	RETURNING v.i, t.fence
)
SELECT v.i, COALESCE(u.fence,
	(SELECT 0::bigint FROM ` + t + ` k WHERE k.key_hash = v.h AND k.lock_key = v.k AND k.expires_at > CURRENT_TIMESTAMP),
	-1)
FROM v LEFT JOIN u ON u.i = v.i`,
		// release of many rows (no two with the same key_hash and token), each as
		// in release, returning the index of each released one; ANY($1) as in
		// acquireBatch.
		releaseBatch: `UPDATE ` + t + ` AS t SET expires_at = CURRENT_TIMESTAMP
FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::int4[]) WITH ORDINALITY AS v(h, k, tok, kid, i)
WHERE t.key_hash = ANY($1::bytea[]) AND t.key_hash = v.h AND t.lock_key = v.k AND t.token = v.tok AND t.expires_at > CURRENT_TIMESTAMP
	AND (pg_try_advisory_xact_lock($5::int4, v.kid) OR pg_notify('` + channel + `', encode(v.h, 'hex')) IS NOT NULL)
RETURNING v.i`,
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

	acq, rel flights        // the acquires and the releases in flight (batch.go)
	batches  sync.WaitGroup // their batches' goroutines
	gaveUp   handles        // acquires whose callers left while their batch ran
}

func newDialect(pool *pgxpool.Pool, owner, table string) *dialect {
	sql := newStatements(table)
	d := &dialect{pool: pool, owner: owner, sql: sql, table: sql.tableID}
	d.acq = flights{run: d.acquireBatch, max: maxFlights, stall: stallAfter, wg: &d.batches}
	d.rel = flights{run: d.releaseBatch, max: maxFlights, stall: stallAfter, wg: &d.batches}
	return d
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
	args := rowArgs{hash: r.Hash, key: r.Key, token: r.Token, us: calls.Micros(ttl)}
	s, c := d.acq.enter(ctx, args)
	var res result
	if s != nil {
		res = d.acquireAlone(ctx, args)
		s.leave()
	} else {
		var ok, queued bool
		if res, ok, queued = d.acq.wait(ctx, c); !ok {
			if queued {
				return 0, false, sqllock.Session{}, sqllock.NotSent(ctx.Err())
			}
			// The batch may still take the row: the cleanup's EndSession waits
			// for the batch (ending its session only if its outcome is unknown),
			// then the row is released.
			return 0, false, d.gaveUp.add(c), ctx.Err()
		}
	}
	switch {
	case res.err != nil:
		return 0, false, res.sess, res.err
	case res.fence > 0:
		return res.fence, true, res.sess, nil
	}
	return 0, false, res.sess, nil // held
}

// acquireAlone runs the acquire of one row on a connection of its own.
func (d *dialect) acquireAlone(ctx context.Context, r rowArgs) result {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		return result{err: sqllock.NotSent(err), known: true}
	}
	defer c.Release()
	sess, err := d.session(ctx, c)
	if err != nil {
		return result{err: sqllock.NotSent(err), known: true}
	}
	res := d.acquireOn(ctx, c, r)
	res.sess = sess
	return res
}

// acquireOn runs the acquire of one row on c.
func (d *dialect) acquireOn(ctx context.Context, c *pgxpool.Conn, r rowArgs) result {
	// One interface value for both uses of the token, and a non-NULL result:
	// each saves a client allocation.
	tok := any(r.token)
	var got int64
	err := c.QueryRow(ctx, d.sql.acquire, r.hash, r.key, tok, pgtype.Interval{Microseconds: r.us, Valid: true}, d.owner, tok).Scan(&got)
	switch {
	case err != nil:
		return result{err: err, known: d.Definite(err)}
	case got >= 0:
		return result{fence: got, known: true} // won, or held (0)
	}
	// No row (the key's first acquire, or Prune deleted it meanwhile): insert
	// decides.
	return d.insertOn(ctx, c, r)
}

// insertOn runs insert, the whole acquire of one row, on c.
func (d *dialect) insertOn(ctx context.Context, c *pgxpool.Conn, r rowArgs) result {
	var fence int64
	err := c.QueryRow(ctx, d.sql.insert, r.hash, r.key, r.token, r.us, d.owner).Scan(&fence)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return result{known: true} // held
	case err != nil:
		return result{err: err, known: d.Definite(err)}
	}
	return result{fence: fence, known: true}
}

// acquireBatch runs the acquires of cs (sorted by key_hash, no two of one key) in
// one statement: their rows are taken in one transaction. When the database
// rejects the statement (which then had no effect), each runs alone.
func (d *dialect) acquireBatch(ctx context.Context, cs []*call) {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		setAll(cs, result{err: sqllock.NotSent(err), known: true})
		return
	}
	defer c.Release()
	sess, err := d.session(ctx, c)
	if err != nil {
		setAll(cs, result{err: sqllock.NotSent(err), known: true})
		return
	}
	each := func(run func(*call) result) {
		for _, x := range cs {
			x.res = run(x)
			x.res.sess = sess
		}
	}
	if len(cs) == 1 {
		each(func(x *call) result { return d.acquireOn(ctx, c, x.r) })
		return
	}
	hs, ks, ts := make([][]byte, len(cs)), make([][]byte, len(cs)), make([][]byte, len(cs))
	us := make([]int64, len(cs))
	for i, x := range cs {
		hs[i], ks[i], ts[i], us[i] = x.r.hash, x.r.key, x.r.token, x.r.us
	}
	fences := make([]int64, len(cs))
	seen := 0
	rows, err := c.Query(ctx, d.sql.acquireBatch, hs, ks, ts, us, d.owner)
	if err == nil {
		var i, fence int64
		_, err = pgx.ForEachRow(rows, []any{&i, &fence}, func() error {
			if i < 1 || i > int64(len(cs)) {
				return fmt.Errorf("acquire: the database returned row %d of %d", i, len(cs))
			}
			fences[i-1] = fence
			seen++
			return nil
		})
		if err == nil && seen != len(cs) {
			err = fmt.Errorf("acquire: the database returned %d rows for %d", seen, len(cs))
		}
	}
	switch {
	case err != nil && d.Definite(err):
		each(func(x *call) result { return d.acquireOn(ctx, c, x.r) })
	case err != nil:
		setAll(cs, result{err: err, sess: sess})
	default:
		for i, x := range cs {
			switch f := fences[i]; {
			case f >= 0:
				x.res = result{fence: f, known: true, sess: sess}
			case wonInBatch(cs, fences, i):
				// Another TryLock of the key took its row in this statement,
				// which has committed: this one, as concurrent, finds it held.
				x.res = result{known: true, sess: sess}
			default:
				x.res = d.insertOn(ctx, c, x.r)
				x.res.sess = sess
			}
		}
	}
}

// wonInBatch reports whether a call of cs other than cs[i], for the same key,
// took its row (cs is sorted by key_hash).
func wonInBatch(cs []*call, fences []int64, i int) bool {
	for _, dir := range []int{-1, 1} {
		for j := i + dir; j >= 0 && j < len(cs) && bytes.Equal(cs[j].r.hash, cs[i].r.hash); j += dir {
			if fences[j] > 0 {
				return true
			}
		}
	}
	return false
}

// setAll gives every call of cs the result res.
func setAll(cs []*call, res result) {
	for _, x := range cs {
		x.res = res
	}
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
	if s.ID < 0 {
		return d.endBatch(ctx, s)
	}
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
	args := rowArgs{hash: r.Hash, key: r.Key, token: r.Token}
	s, c := d.rel.enter(ctx, args)
	if s != nil {
		defer s.leave()
		return d.releaseOn(ctx, d.pool, args)
	}
	res, ok, _ := d.rel.wait(ctx, c)
	if !ok {
		return false, ctx.Err()
	}
	return res.ok, res.err
}

// execer is a pool or a connection.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// releaseOn runs the release of one row with e.
func (d *dialect) releaseOn(ctx context.Context, e execer, r rowArgs) (bool, error) {
	tag, err := e.Exec(ctx, d.sql.release, r.hash, r.key, r.token, d.table, keyID(r.hash))
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// releaseBatch runs the releases of cs (sorted by key_hash, no two of one row) in
// one statement; when the database rejects it (no effect), each runs alone.
func (d *dialect) releaseBatch(ctx context.Context, cs []*call) {
	each := func() {
		for _, x := range cs {
			x.res.ok, x.res.err = d.releaseOn(ctx, d.pool, x.r)
		}
	}
	if len(cs) == 1 {
		each()
		return
	}
	hs, ks, ts := make([][]byte, len(cs)), make([][]byte, len(cs)), make([][]byte, len(cs))
	kids := make([]int32, len(cs))
	for i, x := range cs {
		hs[i], ks[i], ts[i], kids[i] = x.r.hash, x.r.key, x.r.token, keyID(x.r.hash)
	}
	released := make([]bool, len(cs))
	rows, err := d.pool.Query(ctx, d.sql.releaseBatch, hs, ks, ts, kids, d.table)
	if err == nil {
		var i int64
		_, err = pgx.ForEachRow(rows, []any{&i}, func() error {
			if i < 1 || i > int64(len(cs)) {
				return fmt.Errorf("release: the database returned row %d of %d", i, len(cs))
			}
			released[i-1] = true
			return nil
		})
	}
	switch {
	case err != nil && d.Definite(err):
		each()
	case err != nil:
		setAll(cs, result{err: err})
	default:
		for i, x := range cs {
			x.res = result{ok: released[i], known: true}
		}
	}
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
