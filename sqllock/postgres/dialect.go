package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/sqllock/sqldialect"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// dialect runs the statements of one table on a pool.
type dialect struct {
	pool  *pgxpool.Pool
	owner any // string, boxed once: a statement's arguments are interfaces
	sql   statements
	table any // sql.tableID, boxed once

	// batched: concurrent acquires share round trips (flights); otherwise each
	// runs its own statement on a pooled connection.
	batched  bool
	acquires *driver.Batcher[*call, struct{}] // batch.go; their statements: batchsql.go
	// releases share round trips as acquires do, apart from them; nil: each
	// Release runs its own statement.
	releases *driver.Batcher[sqldialect.Row, bool]
	batches  sync.WaitGroup // their batches' goroutines
	gaveUp   handles        // acquires whose callers left while their batch ran
}

func newDialect(pool *pgxpool.Pool, owner, table string) *dialect {
	sql := newStatements(table)
	d := &dialect{pool: pool, owner: owner, sql: sql, table: sql.tableID, batched: true}
	d.acquires = d.newAcquires(maxFlights, stallAfter)
	d.releases = d.newReleases(maxFlights, stallAfter)
	return d
}

var (
	_ sqldialect.Dialect      = (*dialect)(nil)
	_ sqldialect.BatchRenewer = (*dialect)(nil)
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
	return driver.Retry(ctx, func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "42P07" || pe.Code == "42710") || d.Retryable(err)
	}, func() error {
		_, err := d.pool.Exec(ctx, q)
		return err
	})
}

func (d *dialect) Acquire(ctx context.Context, r sqldialect.Row, ttl time.Duration) (int64, bool, sqldialect.Session, error) {
	args := rowArgs{hash: r.Hash, key: r.Key, token: r.Token, us: sqldialect.Micros(ttl)}
	if !d.batched {
		return acquired(d.acquireAlone(ctx, args))
	}
	c := &call{r: args, done: make(chan struct{})}
	if _, err := d.acquires.Do(ctx, c); err != nil {
		if driver.IsNotSent(err) {
			return 0, false, sqldialect.Session{}, err
		}
		// The batch may still take the row: the cleanup's EndSession waits for
		// the batch (ending its session only if its outcome is unknown), then the
		// row is released.
		return 0, false, d.gaveUp.add(c), err
	}
	return acquired(c.res)
}

// acquired returns res as Dialect.Acquire's results.
func acquired(res result) (int64, bool, sqldialect.Session, error) {
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
		return result{err: driver.NotSent(err), known: true}
	}
	defer c.Release()
	sess, err := d.session(ctx, c)
	if err != nil {
		return result{err: driver.NotSent(err), known: true}
	}
	res := d.acquireOn(ctx, c, r)
	res.sess = sess
	return res
}

// acquireOn runs the acquire of one row on c.
func (d *dialect) acquireOn(ctx context.Context, c *pgxpool.Conn, r rowArgs) result {
	// A non-NULL result saves a client allocation.
	var got int64
	err := c.QueryRow(ctx, d.sql.acquire, d.acquireArgs(r)...).Scan(&got)
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

// session returns the session of c, asked once per connection and kept in its
// CustomData. It is zero (cannot be ended) when the server's pid is not the one
// the connection reported at startup: a pooler such as PgBouncer is in between,
// and the session may serve other clients.
func (d *dialect) session(ctx context.Context, c *pgxpool.Conn) (sqldialect.Session, error) {
	pc := c.Conn().PgConn()
	if s, ok := pc.CustomData()[sessionKey].(sqldialect.Session); ok {
		return s, nil
	}
	var pid int32
	var start time.Time
	err := c.QueryRow(ctx, sessionSQL).Scan(&pid, &start)
	var s sqldialect.Session
	switch {
	case err == nil && uint32(pid) == pc.PID():
		s = sqldialect.Session{ID: int64(pid), Start: start}
	case err == nil, errors.Is(err, pgx.ErrNoRows):
	default:
		return sqldialect.Session{}, err
	}
	pc.CustomData()[sessionKey] = s
	return s, nil
}

func (d *dialect) EndSession(ctx context.Context, s sqldialect.Session) error {
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
		return fmt.Errorf("%w %d: %w", sqldialect.ErrCannotEnd, s.ID, err)
	case err != nil:
		return err
	case !ended:
		return sqldialect.ErrSessionLive // or exited just before the call: the next look tells
	}
	return nil
}

func (d *dialect) Renew(ctx context.Context, r sqldialect.Row, ttl time.Duration) (bool, error) {
	tag, err := d.pool.Exec(ctx, d.sql.renew, r.Hash, r.Key, r.Token, sqldialect.Micros(ttl))
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// RenewBatch renews rs in one statement (sqldialect.BatchRenewer).
func (d *dialect) RenewBatch(ctx context.Context, rs []sqldialect.Row, ttls []time.Duration) ([]bool, error) {
	hs, ks, ts := make([][]byte, len(rs)), make([][]byte, len(rs)), make([][]byte, len(rs))
	us := make([]int64, len(rs))
	for i, r := range rs {
		hs[i], ks[i], ts[i], us[i] = r.Hash, r.Key, r.Token, sqldialect.Micros(ttls[i])
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

// Release never waits for the acquires in flight: releases share round trips
// among themselves only (batch.go).
func (d *dialect) Release(ctx context.Context, r sqldialect.Row) (bool, error) {
	if d.releases == nil {
		return d.releaseOne(ctx, r)
	}
	return d.releases.Do(ctx, r)
}

// releaseOne runs the release of r as its own statement, on a pooled connection.
func (d *dialect) releaseOne(ctx context.Context, r sqldialect.Row) (bool, error) {
	tag, err := d.pool.Exec(ctx, d.sql.release, d.releaseArgs(r)...)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// releaseArgs are the arguments of release for r.
func (d *dialect) releaseArgs(r sqldialect.Row) []any {
	return []any{r.Hash, r.Key, r.Token, d.table, keyID(r.Hash)}
}

func (d *dialect) Inspect(ctx context.Context, r sqldialect.Row) (sqldialect.RowState, bool, error) {
	var st sqldialect.RowState
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
	rows, err := d.pool.Query(ctx, d.sql.candidates, after, sqldialect.Micros(olderThan), limit)
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
		return tx.QueryRow(ctx, d.sql.prune, after, last, sqldialect.Micros(olderThan)).Scan(&n)
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
