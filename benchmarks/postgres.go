package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/postgres"
)

// pgMaxConns is the pool size of every PostgreSQL client: enough for W1's 16
// goroutines, each holding a connection for an advisory lock.
const pgMaxConns = 20

// newPGPool returns a pool of the server at url (its host and port through route);
// when sent is not nil, it counts every statement the pool's connections send.
func newPGPool(ctx context.Context, url string, route Route, sent *atomic.Int64) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	a, err := route.Dial(net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	if err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return nil, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(p)
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	cfg.MaxConns = pgMaxConns
	if sent != nil {
		cfg.ConnConfig.Tracer = sentCounter{sent}
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// PostgresSubjects returns the subjects on one PostgreSQL server: the
// sqllock/postgres Locker, the peer (which is also the floor) advisory locks, and
// the floor of a lease row: two UPDATEs by hand.
func PostgresSubjects(url string, cfg Config) []Subject {
	sent := new(atomic.Int64)
	return []Subject{
		{
			Name: "sqllock/postgres", Protocol: "postgres", Role: Ours,
			Wakeup: "LISTEN/NOTIFY (Waiter)", Waiter: true, Workloads: ours,
			Bound: cfg.TTL, BoundKind: "ttl", Networked: true, Requests: pgSentCounter(sent),
			New: func(ctx context.Context, route Route) (Client, error) {
				pool, err := newPGPool(ctx, url, route, sent)
				if err != nil {
					return nil, err
				}
				l, err := postgres.New(ctx, pool, &sqllock.Options{Table: "bench_locks"})
				if err != nil {
					pool.Close()
					return nil, err
				}
				return &lockerClient{l: l, ttl: cfg.TTL, close: closeBoth(l.Close, func() error { pool.Close(); return nil })}, nil
			},
			Note: fmt.Sprintf("pgxpool of at most %d connections per client", pgMaxConns),
		},
		{
			Name: "postgres advisory lock", Baseline: true, Protocol: "postgres", Role: Peer,
			Wakeup: "server-side queue (pg_advisory_lock blocks)", Workloads: all,
			BoundKind: "connection close", Networked: true,
			New: func(ctx context.Context, route Route) (Client, error) {
				pool, err := newPGPool(ctx, url, route, nil)
				if err != nil {
					return nil, err
				}
				return &pgAdvisory{pool: pool}, nil
			},
			Note: "pg_try_advisory_lock / pg_advisory_lock and pg_advisory_unlock on a connection held for the lock: 2 round trips, the protocol's floor too; no ttl, no fence",
		},
		{
			Name: "postgres lease row floor", Protocol: "postgres", Role: Floor,
			Wakeup: "-", Workloads: w1Only, Networked: true,
			New: func(ctx context.Context, route Route) (Client, error) {
				pool, err := newPGPool(ctx, url, route, nil)
				if err != nil {
					return nil, err
				}
				if _, err := pool.Exec(ctx, pgFloorTable); err != nil {
					pool.Close()
					return nil, err
				}
				return &pgLeaseRow{pool: pool, ttl: cfg.TTL}, nil
			},
			Note: "what a lease row with a fence costs at least: a committed UPDATE that takes the expired row (fence + 1, expiry by the server's clock, RETURNING fence), then one that expires it if the token still owns it; 2 round trips, 2 commits, each on a pooled connection",
		},
	}
}

// pgFloorTable is the table of the lease row floor: a key's row, made on its
// first TryLock, never deleted.
const pgFloorTable = `CREATE TABLE IF NOT EXISTS bench_floor_leases (
	lock_key text PRIMARY KEY,
	token bytea NOT NULL,
	fence bigint NOT NULL,
	expires_at timestamptz NOT NULL
)`

// pgLeaseRow is the floor of a lease kept as a row: two single-row UPDATEs.
type pgLeaseRow struct {
	pool *pgxpool.Pool
	ttl  time.Duration
	seen sync.Map // keys whose row this client has made
}

func (c *pgLeaseRow) TryLock(ctx context.Context, key string) (Held, error) {
	if _, ok := c.seen.Load(key); !ok {
		if _, err := c.pool.Exec(ctx, `INSERT INTO bench_floor_leases VALUES ($1, '', 0, 'epoch') ON CONFLICT DO NOTHING`, key); err != nil {
			return nil, err
		}
		c.seen.Store(key, true)
	}
	token := []byte(strconv.FormatInt(pgFloorToken.Add(1), 36))
	var fence int64
	err := c.pool.QueryRow(ctx, `UPDATE bench_floor_leases SET token = $2, fence = fence + 1,
	expires_at = now() + $3::bigint * interval '1 microsecond'
WHERE lock_key = $1 AND expires_at <= now() RETURNING fence`, key, token, c.ttl.Microseconds()).Scan(&fence)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrBusy
	}
	if err != nil {
		return nil, err
	}
	return pgLeaseRowHeld{c: c, key: key, token: token}, nil
}

func (c *pgLeaseRow) Lock(ctx context.Context, key string) (Held, error) {
	return nil, errors.New("the floor runs W1 only")
}

func (c *pgLeaseRow) Close() error {
	c.pool.Close()
	return nil
}

// pgFloorToken makes the floor's tokens.
var pgFloorToken atomic.Int64

type pgLeaseRowHeld struct {
	c     *pgLeaseRow
	key   string
	token []byte
}

func (h pgLeaseRowHeld) Unlock(ctx context.Context) error {
	tag, err := h.c.pool.Exec(ctx, `UPDATE bench_floor_leases SET expires_at = now()
WHERE lock_key = $1 AND token = $2 AND expires_at > now()`, h.key, h.token)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return errors.New("the lease row floor: the lease was not held")
	}
	return nil
}

// pgAdvisory is PostgreSQL's session-level advisory locks, each held on a pooled
// connection that stays out of the pool until the unlock.
type pgAdvisory struct{ pool *pgxpool.Pool }

// advisoryKey maps a key to the advisory lock's bigint.
func advisoryKey(key string) int64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return int64(h.Sum64())
}

func (c *pgAdvisory) acquire(ctx context.Context, key string, wait bool) (Held, error) {
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	k := advisoryKey(key)
	if wait {
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", k); err != nil {
			// A cancelled query closes the connection, so the pool drops it and the
			// server ends its session, releasing a lock it may have granted.
			conn.Release()
			return nil, err
		}
		return pgAdvisoryHeld{conn, k}, nil
	}
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", k).Scan(&ok); err != nil {
		conn.Release()
		return nil, err
	}
	if !ok {
		conn.Release()
		return nil, ErrBusy
	}
	return pgAdvisoryHeld{conn, k}, nil
}

func (c *pgAdvisory) TryLock(ctx context.Context, key string) (Held, error) {
	return c.acquire(ctx, key, false)
}

func (c *pgAdvisory) Lock(ctx context.Context, key string) (Held, error) {
	return c.acquire(ctx, key, true)
}

func (c *pgAdvisory) Close() error {
	c.pool.Close()
	return nil
}

type pgAdvisoryHeld struct {
	conn *pgxpool.Conn
	k    int64
}

// Abandon closes the connection of a holder that was killed, without unlocking,
// so that the pool can close.
func (h pgAdvisoryHeld) Abandon() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = h.conn.Conn().Close(ctx)
	h.conn.Release()
}

func (h pgAdvisoryHeld) Unlock(ctx context.Context) error {
	defer h.conn.Release()
	var ok bool
	if err := h.conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", h.k).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return errors.New("pg_advisory_unlock: the lock was not held")
	}
	return nil
}

// sentCounter is a pgx tracer that counts the statements (a batch as one) that
// its connections send.
type sentCounter struct{ n *atomic.Int64 }

func (c sentCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (sentCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c sentCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (sentCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (sentCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// pgSentCounter reads the statements the subject's clients sent: PostgreSQL's
// own pg_stat_database counts come late (an idle backend flushes its statistics
// up to 10 s after its last statement), so W4's window saw the counts of the
// settle phase before it (89 "requests" per handoff where the clients sent 9).
func pgSentCounter(sent *atomic.Int64) *Counter {
	return &Counter{
		Name: "statements the clients sent (pgx tracer; a batch counts once)",
		Read: func(context.Context) (int64, error) { return sent.Load(), nil },
	}
}
