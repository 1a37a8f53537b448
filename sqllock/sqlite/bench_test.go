package sqlite

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
)

// BenchmarkTryLockUnlock measures an uncontended TryLock followed by Unlock of one
// key on a database file.
func BenchmarkTryLockUnlock(b *testing.B) {
	l, _ := newClient(b, filepath.Join(b.TempDir(), "bench.db"), &sqllock.Options{Table: "bench"})
	sqltest.BenchTryLockUnlock(b, l)
}

// BenchmarkConformance measures the Locker with the conformance suite's workloads on
// one database file: uncontended pairs, and a hand-off among 16 Lockers (each with a
// handle of its own, as 16 processes would have), with the gap from an Unlock to the
// next acquisition.
func BenchmarkConformance(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bench.db")
	conformance.RunBenchmarks(b, conformance.Harness{NewClient: func(t testing.TB) conformance.Client {
		l, _ := newClient(t, path, &sqllock.Options{Table: "bench"})
		return conformance.Client{Locker: l}
	}})
}

// BenchmarkParallel measures uncontended pairs from 1 and 16 goroutines sharing
// one Locker, each on a key of its own (W1), with the p99 latency of a pair.
func BenchmarkParallel(b *testing.B) {
	for _, g := range []int{1, 16} {
		b.Run(fmt.Sprintf("g%d", g), func(b *testing.B) {
			l, _ := newClient(b, filepath.Join(b.TempDir(), "bench.db"), &sqllock.Options{Table: "bench"})
			sqltest.BenchParallel(b, l, g)
		})
	}
}
