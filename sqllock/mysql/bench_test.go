package mysql

import (
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
