package benchmarks

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/mysql"
)

// mysqlMaxConns is the pool size of a sqllock/mysql client: enough for W1's 16
// goroutines, and few enough that W4's clients stay far below MariaDB's default
// max_connections (151).
const mysqlMaxConns = 20

// newMySQLDB opens the server of dsn (its address through route).
func newMySQLDB(dsn string, route Route) (*sql.DB, error) {
	cfg, err := mysqldriver.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if cfg.Addr, err = route.Dial(cfg.Addr); err != nil {
		return nil, err
	}
	cfg.Timeout = 5 * time.Second
	cfg.InterpolateParams = true
	return sql.Open("mysql", cfg.FormatDSN())
}

// MySQLSubjects returns the subjects on one MySQL or MariaDB server: sqllock's
// MySQL Locker (a Waiter with one poller per Locker and key) and the floor GET_LOCK.
func MySQLSubjects(dsn string, cfg Config) []Subject {
	return []Subject{
		{
			Name: "sqllock/mysql", Protocol: "mysql", Role: Ours,
			Wakeup: "Wait: one poller per Locker and key (1 ms after a change, up to 50 ms), one waiter woken at a time", Workloads: ours,
			Bound: cfg.TTL, BoundKind: "ttl", Networked: true, Requests: mysqlCounter(dsn),
			New: func(ctx context.Context, route Route) (Client, error) {
				db, err := newMySQLDB(dsn, route)
				if err != nil {
					return nil, err
				}
				// As many idle connections as open ones: with Go's default of 2 idle,
				// W1's 16 goroutines measured reconnects.
				db.SetMaxOpenConns(mysqlMaxConns)
				db.SetMaxIdleConns(mysqlMaxConns)
				l, err := mysql.New(ctx, db, &sqllock.Options{Table: "bench_locks"})
				if err != nil {
					_ = db.Close()
					return nil, err
				}
				return &lockerClient{l: l, ttl: cfg.TTL, close: closeBoth(l.Close, db.Close)}, nil
			},
			Note: fmt.Sprintf("the sqllock/mysql dialect on a MariaDB server; database/sql pool of at most %d connections per client, as many kept idle", mysqlMaxConns),
		},
		{
			Name: "mariadb GET_LOCK floor", Baseline: true, Protocol: "mysql", Role: Floor,
			Wakeup: "-", Workloads: w1Only, Networked: true,
			New: func(ctx context.Context, route Route) (Client, error) {
				db, err := newMySQLDB(dsn, route)
				if err != nil {
					return nil, err
				}
				db.SetMaxIdleConns(pgMaxConns)
				return &getLock{db: db}, nil
			},
			Note: "GET_LOCK(name, 0) and RELEASE_LOCK(name) on a connection held for the lock: 2 round trips; no ttl, no fence",
		},
	}
}

// getLock is MySQL's named locks, each held on its own connection.
type getLock struct{ db *sql.DB }

// lockName maps a key to a name within MySQL's 64 characters.
func lockName(key string) string {
	h := sha256.Sum256([]byte(key))
	return "bench-" + hex.EncodeToString(h[:16])
}

func (c *getLock) TryLock(ctx context.Context, key string) (Held, error) {
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	name := lockName(key)
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", name).Scan(&got); err != nil {
		_ = conn.Close()
		return nil, err
	}
	if got.Int64 != 1 {
		_ = conn.Close()
		return nil, ErrBusy
	}
	return getLockHeld{conn, name}, nil
}

func (c *getLock) Lock(ctx context.Context, key string) (Held, error) {
	return nil, errors.New("the floor runs W1 only")
}

func (c *getLock) Close() error { return c.db.Close() }

type getLockHeld struct {
	conn *sql.Conn
	name string
}

func (h getLockHeld) Unlock(ctx context.Context) error {
	defer h.conn.Close() // back to the pool
	var got sql.NullInt64
	if err := h.conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", h.name).Scan(&got); err != nil {
		return err
	}
	if got.Int64 != 1 {
		return errors.New("RELEASE_LOCK: the lock was not held")
	}
	return nil
}
