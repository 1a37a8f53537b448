package sqllock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A PostgresLocker is a Locker on PostgreSQL. It adds distlock.Waiter: Wait listens
// (LISTEN) for the notification that Unlock sends (pg_notify, in the releasing
// statement itself) on a connection of its own, which the Locker's Waits share and
// which stays open for 5s after the last Wait returned.
type PostgresLocker struct {
	*Locker
	ln *listener
}

var _ distlock.Waiter = (*PostgresLocker)(nil)

// NewPostgres returns a Locker whose leases are rows of a table in the PostgreSQL
// database that pool connects to, and creates the table if it is missing. The pool
// must stay open while the Locker is used; the Locker does not close it.
//
// Acquire is one INSERT ... ON CONFLICT DO UPDATE ... WHERE expired RETURNING fence
// statement; expiry uses the database's now(). Wait opens one extra connection with
// the pool's connection settings, outside the pool, kept while any Wait call is in
// progress and for 5s after (see Close).
func NewPostgres(ctx context.Context, pool *pgxpool.Pool, opts *Options) (*PostgresLocker, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: NewPostgres: nil *pgxpool.Pool", distlock.ErrInvalid)
	}
	r, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	d := newPGDialect(pool, r)
	if err := d.createTable(ctx); err != nil {
		return nil, fmt.Errorf("sqllock: create table %s: %w", r.name(), err)
	}
	return &PostgresLocker{
		Locker: newLocker(d, r),
		ln:     &listener{pool: pool, channel: d.channel, idle: listenIdle, ping: listenPing},
	}, nil
}

// Close closes the connection that the Locker's Waits listen on, if it is open;
// Waits in progress return nil (their keys may be free: call TryLock). The Locker
// stays usable: a later Wait opens a connection again. Close is optional: the
// connection closes by itself 5s after the last Wait returned. It does not close
// the pool, and returns nil.
func (l *PostgresLocker) Close() error {
	l.ln.close()
	return nil
}

// pgDialect holds the statements for one table.
type pgDialect struct {
	pool                                     *pgxpool.Pool
	owner                                    string
	create, acquireSQL, renewSQL, inspectSQL string
	releaseSQL                               string // also notifies the channel
	channel                                  string // of the notifications
}

// pgSessionKey is where a connection's session is kept in its PgConn.CustomData.
const pgSessionKey = "github.com/distlock/distlock/sqllock.session"

// pgSessionSQL names the connection's own session; pgEndSQL terminates a session
// (the same pid and start) and waits up to $3 ms until it has exited. It returns no
// row when the session is gone, and false (with a warning) while it is still there.
// The two-argument pg_terminate_backend needs PostgreSQL 14.
const (
	pgSessionSQL = `SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()`
	pgEndSQL     = `SELECT pg_terminate_backend(pid, $3) FROM pg_stat_activity WHERE pid = $1 AND backend_start = $2`
	pgEndWaitMS  = 1000
)

func newPGDialect(pool *pgxpool.Pool, r resolved) *pgDialect {
	t := r.quoted(`"`)
	sum := sha256.Sum256([]byte(r.name()))
	return &pgDialect{
		pool:    pool,
		owner:   r.owner,
		channel: "distlock_" + hex.EncodeToString(sum[:8]),
		create: `CREATE TABLE IF NOT EXISTS ` + t + ` (
	key_hash bytea PRIMARY KEY,
	lock_key bytea NOT NULL,
	token bytea NOT NULL,
	fence bigint NOT NULL,
	expires_at timestamptz NOT NULL,
	owner text NOT NULL
)`,
		// now() is the start of the statement's transaction: this statement alone.
		acquireSQL: `INSERT INTO ` + t + ` AS t (key_hash, lock_key, token, fence, expires_at, owner)
VALUES ($1, $2, $3, 1, now() + $4::bigint * interval '1 microsecond', $5)
ON CONFLICT (key_hash) DO UPDATE
SET token = excluded.token, fence = t.fence + 1, expires_at = excluded.expires_at, owner = excluded.owner
WHERE t.expires_at <= now() AND t.lock_key = excluded.lock_key
RETURNING t.fence`,
		// GREATEST: a renewal never moves the expiry earlier (a shorter ttl whose
		// reply is lost must not cut the lease under its holder's old Expires).
		renewSQL: `UPDATE ` + t + ` SET expires_at = GREATEST(expires_at, now() + $4::bigint * interval '1 microsecond')
WHERE key_hash = $1 AND lock_key = $2 AND token = $3 AND expires_at > now()`,
		// pg_notify is volatile, so it runs once per released row; the notification
		// is delivered when the statement commits.
		releaseSQL: `WITH u AS (
	UPDATE ` + t + ` SET expires_at = now()
	WHERE key_hash = $1 AND lock_key = $2 AND token = $3 AND expires_at > now()
	RETURNING 1
)
SELECT count(*) FROM (SELECT pg_notify($4, $5) FROM u) AS n`,
		inspectSQL: `SELECT fence, owner, (EXTRACT(EPOCH FROM expires_at - now()) * 1000000)::bigint
FROM ` + t + ` WHERE key_hash = $1 AND lock_key = $2 AND expires_at > now()`,
	}
}

func (d *pgDialect) createTable(ctx context.Context) error {
	var err error
	for range maxAttempts {
		if _, err = d.pool.Exec(ctx, d.create); err == nil {
			return nil
		}
		// Two concurrent CREATE TABLE IF NOT EXISTS may collide on the catalog's
		// unique index; the second then finds the table.
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || (pe.Code != "23505" && pe.Code != "42P07") {
			return err
		}
	}
	return err
}

func (d *pgDialect) acquire(ctx context.Context, kh, key, token []byte, ttl time.Duration) (int64, bool, session, error) {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		return 0, false, session{}, notSent(err)
	}
	defer c.Release()
	sess, err := d.session(ctx, c)
	if err != nil {
		return 0, false, session{}, notSent(err)
	}
	var fence int64
	err = c.QueryRow(ctx, d.acquireSQL, kh, key, token, micros(ttl), d.owner).Scan(&fence)
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
func (d *pgDialect) session(ctx context.Context, c *pgxpool.Conn) (session, error) {
	pc := c.Conn().PgConn()
	if s, ok := pc.CustomData()[pgSessionKey].(session); ok {
		return s, nil
	}
	var pid int32
	var start time.Time
	err := c.QueryRow(ctx, pgSessionSQL).Scan(&pid, &start)
	var s session
	switch {
	case err == nil && uint32(pid) == pc.PID():
		s = session{id: int64(pid), start: start}
	case err == nil, errors.Is(err, pgx.ErrNoRows):
	default:
		return session{}, err
	}
	pc.CustomData()[pgSessionKey] = s
	return s, nil
}

func (d *pgDialect) endSession(ctx context.Context, s session) error {
	var ended bool
	err := d.pool.QueryRow(ctx, pgEndSQL, int32(s.id), s.start, int64(pgEndWaitMS)).Scan(&ended)
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil // gone
	case errors.As(err, &pe):
		return fmt.Errorf("%w %d: %w", errCannotEnd, s.id, err)
	case err != nil:
		return err
	case !ended:
		return errSessionLive // or exited just before the call: the next look tells
	}
	return nil
}

func (d *pgDialect) renew(ctx context.Context, kh, key, token []byte, ttl time.Duration) (bool, error) {
	tag, err := d.pool.Exec(ctx, d.renewSQL, kh, key, token, micros(ttl))
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

func (d *pgDialect) release(ctx context.Context, kh, key, token []byte) (bool, error) {
	var n int64
	if err := d.pool.QueryRow(ctx, d.releaseSQL, kh, key, token, d.channel, hex.EncodeToString(kh)).Scan(&n); err != nil {
		return false, err
	}
	return n == 1, nil
}

func (d *pgDialect) inspect(ctx context.Context, kh, key []byte) (holder, bool, error) {
	var h holder
	var us int64
	err := d.pool.QueryRow(ctx, d.inspectSQL, kh, key).Scan(&h.fence, &h.owner, &us)
	if errors.Is(err, pgx.ErrNoRows) {
		return h, false, nil
	}
	if err != nil {
		return h, false, err
	}
	h.remaining = time.Duration(us) * time.Microsecond
	return h, true, nil
}

func (d *pgDialect) retryable(err error) bool {
	var pe *pgconn.PgError
	// serialization_failure, deadlock_detected
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

func (d *pgDialect) definite(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) || pgconn.SafeToRetry(err)
}
