package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
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

// BenchmarkParallel measures W1: uncontended pairs on distinct keys from 1 and 16
// goroutines sharing one client (a pool of 20 connections), ours next to the peer
// pg_try_advisory_lock / pg_advisory_unlock on a connection held for the lock.
// Compare pairs/s of ours and the peer, and of 16 and 1 goroutines, in one run.
func BenchmarkParallel(b *testing.B) {
	for _, g := range []int{1, 16} {
		b.Run(fmt.Sprintf("advisory/g%d", g), func(b *testing.B) {
			pool := newPoolN(b, "", 20)
			sqltest.BenchParallelFunc(b, g, func(ctx context.Context, key string) error {
				conn, err := pool.Acquire(ctx)
				if err != nil {
					return err
				}
				defer conn.Release()
				h := sha256.Sum256([]byte(key))
				k := int64(binary.BigEndian.Uint64(h[:]))
				var ok bool
				if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", k).Scan(&ok); err != nil || !ok {
					return fmt.Errorf("pg_try_advisory_lock: %v, %w", ok, err)
				}
				return conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", k).Scan(&ok)
			})
		})
		b.Run(fmt.Sprintf("two_updates/g%d", g), func(b *testing.B) {
			// the floor of a lock that writes its state: two committed UPDATEs of
			// the key's row
			pool := newPoolN(b, "", 20)
			_, err := pool.Exec(b.Context(), `CREATE TABLE IF NOT EXISTS bench_floor_keys (k text PRIMARY KEY, v bigint NOT NULL)`)
			require.NoError(b, err)
			sqltest.BenchParallelFunc(b, g, func(ctx context.Context, key string) error {
				for range 2 {
					if _, err := pool.Exec(ctx, `INSERT INTO bench_floor_keys VALUES ($1, 0) ON CONFLICT (k) DO UPDATE SET v = bench_floor_keys.v + 1`, key); err != nil {
						return err
					}
				}
				return nil
			})
		})
		b.Run(fmt.Sprintf("ours/g%d", g), func(b *testing.B) {
			l, err := New(sqltest.OpCtx(b), newPoolN(b, "", 20), &sqllock.Options{Table: "bench"})
			require.NoError(b, err)
			b.Cleanup(func() { l.Close() })
			sqltest.BenchParallel(b, l, g)
		})
		b.Run(fmt.Sprintf("ours-releases-alone/g%d", g), func(b *testing.B) {
			l, err := New(sqltest.OpCtx(b), newPoolN(b, "", 20), &sqllock.Options{Table: "bench"})
			require.NoError(b, err)
			b.Cleanup(func() { l.Close() })
			l.d.releases = nil
			sqltest.BenchParallel(b, l, g)
		})
	}
}
