package sqllock

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/faultproxy"
)

// BenchmarkTryLockUnlock measures an uncontended TryLock followed by Unlock of one
// key, per dialect, directly against the test servers (no proxy), next to the floor
// on the same PostgreSQL: pg_try_advisory_lock plus pg_advisory_unlock on one pooled
// connection (no write), and two committed single-row UPDATEs. Compare the ns/op of
// the sub-benchmarks of one run.
func BenchmarkTryLockUnlock(b *testing.B) {
	run := func(b *testing.B, l distlock.Locker) {
		key := "bench-" + distlock.NewToken()
		ctx := b.Context()
		for b.Loop() {
			lease, err := l.TryLock(ctx, key, 10*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(ctx, lease); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("pg_advisory_floor", func(b *testing.B) {
		pool := pgPool(b, "")
		ctx := b.Context()
		for b.Loop() {
			conn, err := pool.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
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
	// Two committed single-row UPDATEs: what any lock that writes its state (as
	// these lease rows do, so that they survive restarts) pays at least.
	b.Run("pg_two_updates", func(b *testing.B) {
		pool := pgPool(b, "")
		ctx := b.Context()
		for _, q := range []string{
			`CREATE TABLE IF NOT EXISTS bench_floor (id int PRIMARY KEY, v bigint NOT NULL)`,
			`INSERT INTO bench_floor VALUES (1, 0) ON CONFLICT DO NOTHING`,
		} {
			if _, err := pool.Exec(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
		for b.Loop() {
			for range 2 {
				if _, err := pool.Exec(ctx, `UPDATE bench_floor SET v = v + 1 WHERE id = 1`); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("postgres", func(b *testing.B) {
		l, err := NewPostgres(b.Context(), pgPool(b, ""), &Options{Table: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		run(b, l)
	})
	b.Run("mariadb", func(b *testing.B) {
		l, err := NewMySQL(b.Context(), myDB(b, "", nil), &Options{Table: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		run(b, l)
	})
	b.Run("sqlite", func(b *testing.B) {
		l, err := NewSQLite(b.Context(), sqliteDB(b, filepath.Join(b.TempDir(), "bench.db")), &Options{Table: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		run(b, l)
	})
}

// BenchmarkTryLockUnlockRoundTrips measures an uncontended TryLock followed by Unlock
// through a proxy that adds 20ms each way: ns/op divided by 40ms is the number of
// round trips per TryLock+Unlock (2 when each is one statement), whatever the
// machine's load.
func BenchmarkTryLockUnlockRoundTrips(b *testing.B) {
	const oneWay = 20 * time.Millisecond
	run := func(b *testing.B, p *faultproxy.Proxy, l distlock.Locker) {
		key := "bench-" + distlock.NewToken()
		ctx := b.Context()
		warm, err := l.TryLock(ctx, key, 10*time.Second) // connect, prepare
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx, warm); err != nil {
			b.Fatal(err)
		}
		p.Delay(oneWay)
		for b.Loop() {
			lease, err := l.TryLock(ctx, key, 10*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(ctx, lease); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(2*oneWay), "roundtrips/op")
	}
	b.Run("postgres", func(b *testing.B) {
		p := newBenchProxy(b, pgSrv.Addr())
		l, err := NewPostgres(b.Context(), pgPool(b, p.Addr()), &Options{Table: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		run(b, p, l)
	})
	b.Run("mariadb", func(b *testing.B) {
		p := newBenchProxy(b, mySrv.Addr())
		l, err := NewMySQL(b.Context(), myDB(b, p.Addr(), nil), &Options{Table: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		run(b, p, l)
	})
}

func newBenchProxy(b *testing.B, addr string) *faultproxy.Proxy {
	p, err := faultproxy.New(addr, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	return p
}
