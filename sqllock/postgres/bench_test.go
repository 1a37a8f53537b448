package postgres

import (
	"testing"

	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/faultproxy"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
	"github.com/stretchr/testify/require"
)

// BenchmarkTryLockUnlock measures an uncontended TryLock followed by Unlock of one
// key, directly against the test server (no proxy), next to the floor on the same
// PostgreSQL: pg_try_advisory_lock plus pg_advisory_unlock on one pooled
// connection (no write), and two committed single-row UPDATEs (what any lock that
// writes its state, as these lease rows do so that they survive restarts, pays at
// least). Compare the ns/op of the sub-benchmarks of one run.
func BenchmarkTryLockUnlock(b *testing.B) {
	b.Run("pg_advisory_floor", func(b *testing.B) {
		pool := newPool(b, "")
		ctx := b.Context()
		for b.Loop() {
			conn, err := pool.Acquire(ctx)
			require.NoError(b, err)
			var ok bool
			if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", int64(42)).Scan(&ok); err != nil || !ok {
				b.Fatalf("pg_try_advisory_lock: %v, %v", ok, err)
			}
			if err := conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", int64(42)).Scan(&ok); err != nil || !ok {
				b.Fatalf("pg_advisory_unlock: %v, %v", ok, err)
			}
			conn.Release()
		}
	})
	b.Run("pg_two_updates", func(b *testing.B) {
		pool := newPool(b, "")
		ctx := b.Context()
		for _, q := range []string{
			`CREATE TABLE IF NOT EXISTS bench_floor (id int PRIMARY KEY, v bigint NOT NULL)`,
			`INSERT INTO bench_floor VALUES (1, 0) ON CONFLICT DO NOTHING`,
		} {
			_, err := pool.Exec(ctx, q)
			require.NoError(b, err)
		}
		for b.Loop() {
			for range 2 {
				_, err := pool.Exec(ctx, `UPDATE bench_floor SET v = v + 1 WHERE id = 1`)
				require.NoError(b, err)
			}
		}
	})
	b.Run("postgres", func(b *testing.B) {
		sqltest.BenchTryLockUnlock(b, newLocker(b, "", &sqllock.Options{Table: "bench"}))
	})
}

// BenchmarkTryLockUnlockRoundTrips counts the round trips per TryLock+Unlock
// through a proxy that adds 20ms each way (metric roundtrips/op).
func BenchmarkTryLockUnlockRoundTrips(b *testing.B) {
	p, err := faultproxy.New(pgSrv.Addr(), nil)
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
