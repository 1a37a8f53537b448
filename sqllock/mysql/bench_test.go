package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/faultproxy"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
	"github.com/stretchr/testify/require"
)

// BenchmarkTryLockUnlock measures an uncontended TryLock followed by Unlock of one
// key, directly against the test server (no proxy).
func BenchmarkTryLockUnlock(b *testing.B) {
	sqltest.BenchTryLockUnlock(b, newLocker(b, "", &sqllock.Options{Table: "bench"}))
}

// BenchmarkTryLockUnlockRoundTrips counts the round trips per TryLock+Unlock
// through a proxy that adds 20ms each way (metric roundtrips/op).
func BenchmarkTryLockUnlockRoundTrips(b *testing.B) {
	p, err := faultproxy.New(mySrv.Addr(), nil)
	require.NoError(b, err)
	b.Cleanup(func() { _ = p.Close() })
	sqltest.BenchRoundTrips(b, p, newLocker(b, p.Addr(), &sqllock.Options{Table: "bench"}))
}

// BenchmarkConformance measures the Locker with the conformance suite's workloads:
// uncontended pairs, and a hand-off among 16 Lockers (each with a pool of its own),
// with the gap from an Unlock to the next acquisition.
func BenchmarkConformance(b *testing.B) {
	conformance.RunBenchmarks(b, conformance.Harness{NewClient: func(t testing.TB) conformance.Client {
		return conformance.Client{Locker: newLocker(t, "", &sqllock.Options{Table: "bench"})}
	}})
}

// BenchmarkParallel measures W1: uncontended pairs on distinct keys from 1 and 16
// goroutines sharing one client (a handle that keeps 20 idle connections: Go's
// default of 2 would reconnect all the time), ours next to the peer GET_LOCK(name,
// 0) / RELEASE_LOCK on a connection held for the lock. Compare pairs/s of ours and
// the peer, and of 16 and 1 goroutines, in one run.
func BenchmarkParallel(b *testing.B) {
	for _, g := range []int{1, 16} {
		b.Run(fmt.Sprintf("get_lock/g%d", g), func(b *testing.B) {
			db := newDB(b, "", nil)
			db.SetMaxIdleConns(20)
			sqltest.BenchParallelFunc(b, g, func(ctx context.Context, key string) error {
				conn, err := db.Conn(ctx)
				if err != nil {
					return err
				}
				defer conn.Close()
				var got sql.NullInt64
				if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", key).Scan(&got); err != nil || got.Int64 != 1 {
					return fmt.Errorf("GET_LOCK: %v, %w", got, err)
				}
				return conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", key).Scan(&got)
			})
		})
		b.Run(fmt.Sprintf("two_updates/g%d", g), func(b *testing.B) {
			// the floor of a lock that writes its state: two committed UPDATEs of
			// the key's row
			db := newDB(b, "", nil)
			db.SetMaxIdleConns(20)
			_, err := db.ExecContext(b.Context(), "CREATE TABLE IF NOT EXISTS bench_floor_keys (k VARBINARY(255) PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB")
			require.NoError(b, err)
			sqltest.BenchParallelFunc(b, g, func(ctx context.Context, key string) error {
				for range 2 {
					if _, err := db.ExecContext(ctx, "INSERT INTO bench_floor_keys VALUES (?, 0) ON DUPLICATE KEY UPDATE v = v + 1", key); err != nil {
						return err
					}
				}
				return nil
			})
		})
		b.Run(fmt.Sprintf("ours_idle2/g%d", g), func(b *testing.B) {
			// Go's default of 2 idle connections
			l, err := New(sqltest.OpCtx(b), newDB(b, "", nil), &sqllock.Options{Table: "bench"})
			require.NoError(b, err)
			b.Cleanup(func() { l.Close() })
			sqltest.BenchParallel(b, l, g)
		})
		b.Run(fmt.Sprintf("ours/g%d", g), func(b *testing.B) {
			db := newDB(b, "", nil)
			db.SetMaxIdleConns(20)
			l, err := New(sqltest.OpCtx(b), db, &sqllock.Options{Table: "bench"})
			require.NoError(b, err)
			b.Cleanup(func() { l.Close() })
			sqltest.BenchParallel(b, l, g)
		})
	}
}
