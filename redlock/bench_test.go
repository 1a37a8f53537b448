package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/driver"
)

// BenchmarkTryLockUnlock: one uncontended TryLock and Unlock of one key on the five
// nodes per op.
func BenchmarkTryLockUnlock(b *testing.B) {
	l := newLocker(b, nil)
	ctx := context.Background()
	key := "bench-uncontended-" + driver.NewToken()[:8]
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

// BenchmarkConformance measures redlock over the five nodes with the conformance
// suite's workloads: uncontended pairs, and a hand-off among 16 Lockers (each with
// clients of its own, as if in another process) that wait through pub/sub, with the
// gap from an Unlock to the next acquisition.
func BenchmarkConformance(b *testing.B) {
	conformance.RunBenchmarks(b, conformance.Harness{NewClient: func(t testing.TB) conformance.Client {
		return conformance.Client{Locker: newLocker(t, nil)}
	}})
}
