package etcdlock_test

// Benchmarks of etcdlock against go.etcd.io/etcd/client/v3/concurrency.Mutex on the
// single-member etcd of TestMain. Besides ns/op they report rtt/op: the requests
// (unary calls and stream messages) that all clients sent, per acquisition. Run:
//
//	go test -run '^$' -bench . -benchtime 200x ./etcdlock

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/conformance"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/client/v3/concurrency"
)

const benchTTL = 10 * time.Second

// BenchmarkUncontended: one client acquires and releases a free key.
func BenchmarkUncontended(b *testing.B) {
	ctx := context.Background()
	endpoints := []string{etcdSrv.Addr()}
	b.Run("etcdlock", func(b *testing.B) {
		var c rttCounter
		l := newLocker(b, newClient(b, endpoints, &c), nil)
		key := "bench-" + distlock.NewToken()
		runUncontended(b, &c, func() {
			lease, err := l.TryLock(ctx, key, benchTTL)
			require.NoError(b, err)
			require.NoError(b, l.Unlock(ctx, lease))
		})
	})
	// A session (lease) per acquisition: the same lifetime as an etcdlock lease.
	b.Run("mutex-session-per-lock", func(b *testing.B) {
		var c rttCounter
		cli := newClient(b, endpoints, &c)
		pfx := "bench-mutex-" + distlock.NewToken()
		runUncontended(b, &c, func() {
			s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(benchTTL/time.Second)))
			require.NoError(b, err)
			m := concurrency.NewMutex(s, pfx)
			require.NoError(b, m.TryLock(ctx))
			require.NoError(b, m.Unlock(ctx))
			require.NoError(b, s.Close())
		})
	})
	// One long-lived session: the lease is shared by every acquisition, kept
	// alive in the background.
	b.Run("mutex-shared-session", func(b *testing.B) {
		var c rttCounter
		cli := newClient(b, endpoints, &c)
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(benchTTL/time.Second)))
		require.NoError(b, err)
		defer s.Close()
		m := concurrency.NewMutex(s, "bench-mutex-"+distlock.NewToken())
		runUncontended(b, &c, func() {
			require.NoError(b, m.TryLock(ctx))
			require.NoError(b, m.Unlock(ctx))
		})
	})
}

func runUncontended(b *testing.B, c *rttCounter, op func()) {
	before, n := c.Load(), 0
	for b.Loop() {
		op()
		n++
	}
	b.ReportMetric(float64(c.Load()-before)/float64(n), "rtt/op")
}

// BenchmarkConformance measures etcdlock with the conformance suite's workloads
// (uncontended pairs, a handoff among 16 clients with its gap), clients connected
// directly to the single member.
func BenchmarkConformance(b *testing.B) {
	conformance.RunBenchmarks(b, conformance.Harness{NewClient: func(t testing.TB) conformance.Client {
		return conformance.Client{Locker: newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), nil)}
	}})
}

// BenchmarkContended16: the peer's side of BenchmarkConformance/Handoff: 16 clients,
// each its own connection and session, take turns on one key with Mutex.Lock (its
// queue) and release it at once. An op is one acquisition.
func BenchmarkContended16(b *testing.B) {
	const waiters = 16
	ctx := context.Background()
	endpoints := []string{etcdSrv.Addr()}
	b.Run("mutex", func(b *testing.B) {
		var c rttCounter
		pfx := "bench-mutex-" + distlock.NewToken()
		ms := make([]*concurrency.Mutex, waiters)
		for i := range ms {
			s, err := concurrency.NewSession(newClient(b, endpoints, &c), concurrency.WithTTL(int(benchTTL/time.Second)))
			require.NoError(b, err)
			b.Cleanup(func() { s.Close() })
			ms[i] = concurrency.NewMutex(s, pfx)
		}
		runContended(b, &c, waiters, func(i int) {
			if err := ms[i].Lock(ctx); err != nil {
				b.Error(err)
				return
			}
			if err := ms[i].Unlock(ctx); err != nil {
				b.Error(err)
			}
		})
	})
}

// runContended runs op (one acquisition and release by waiter i) from waiters
// goroutines until b.N acquisitions are done. Besides rtt/op it reports
// max-share: the most acquisitions one waiter made, as a multiple of a fair share
// (1 is perfectly fair; waiters is one waiter taking every turn).
func runContended(b *testing.B, c *rttCounter, waiters int, op func(i int)) {
	var left atomic.Int64
	left.Store(int64(b.N))
	counts := make([]int, waiters)
	var wg sync.WaitGroup
	before := c.Load()
	b.ResetTimer()
	for i := range waiters {
		wg.Go(func() {
			for left.Add(-1) >= 0 && !b.Failed() {
				op(i)
				counts[i]++
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(c.Load()-before)/float64(b.N), "rtt/op")
	b.ReportMetric(float64(slices.Max(counts))*float64(waiters)/float64(b.N), "max-share")
}
