package etcdlock_test

// Benchmarks of etcdlock against go.etcd.io/etcd/client/v3/concurrency.Mutex on the
// single-member etcd of TestMain. Besides ns/op they report rtt/op: the requests
// (unary calls and stream messages) that all clients sent, per acquisition. Run:
//
//	go test -run '^$' -bench . -benchtime 200x ./etcdlock

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/driver"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
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
		key := "bench-" + driver.NewToken()
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
		pfx := "bench-mutex-" + driver.NewToken()
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
		m := concurrency.NewMutex(s, "bench-mutex-"+driver.NewToken())
		runUncontended(b, &c, func() {
			require.NoError(b, m.TryLock(ctx))
			require.NoError(b, m.Unlock(ctx))
		})
	})
}

// BenchmarkUncontended16: 16 goroutines sharing one client each acquire and
// release a free key of their own (W1 with 16 goroutines): etcdlock against a
// concurrency.Mutex on one shared session.
func BenchmarkUncontended16(b *testing.B) {
	ctx := context.Background()
	endpoints := []string{etcdSrv.Addr()}
	b.Run("etcdlock", func(b *testing.B) {
		var c rttCounter
		l := newLocker(b, newClient(b, endpoints, &c), nil)
		runParallel16(b, &c, func() func() {
			key := "bench-" + driver.NewToken()
			return func() {
				lease, err := l.TryLock(ctx, key, benchTTL)
				require.NoError(b, err)
				require.NoError(b, l.Unlock(ctx, lease))
			}
		})
	})
	b.Run("mutex-shared-session", func(b *testing.B) {
		var c rttCounter
		cli := newClient(b, endpoints, &c)
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(benchTTL/time.Second)))
		require.NoError(b, err)
		defer s.Close()
		runParallel16(b, &c, func() func() {
			m := concurrency.NewMutex(s, "bench-mutex-"+driver.NewToken())
			return func() {
				require.NoError(b, m.TryLock(ctx))
				require.NoError(b, m.Unlock(ctx))
			}
		})
	})
}

// BenchmarkInterleaved runs etcdlock, a concurrency.Mutex on one long-lived
// session and the floor (a put-if-absent transaction on the session's lease and a
// delete-if-unchanged one: the least etcdlock's protocol does) alternately, one
// TryLock+Unlock pair each, each on its own client, and reports their times,
// ours/mutex and ours/floor: on a shared, noisy machine these ratios are steadier
// than those of BenchmarkUncontended's subjects, which run seconds apart.
func BenchmarkInterleaved(b *testing.B) {
	ctx := context.Background()
	endpoints := []string{etcdSrv.Addr()}
	l := newLocker(b, newClient(b, endpoints, nil), nil)
	key := "bench-" + driver.NewToken()
	s, err := concurrency.NewSession(newClient(b, endpoints, nil), concurrency.WithTTL(int(benchTTL/time.Second)))
	require.NoError(b, err)
	defer s.Close()
	m := concurrency.NewMutex(s, "bench-mutex-"+driver.NewToken())
	ours := func() {
		lease, err := l.TryLock(ctx, key, benchTTL)
		require.NoError(b, err)
		require.NoError(b, l.Unlock(ctx, lease))
	}
	mutex := func() {
		require.NoError(b, m.TryLock(ctx))
		require.NoError(b, m.Unlock(ctx))
	}
	// The floor: put-if-absent on the session's lease, delete-if-unchanged.
	fcli := newClient(b, endpoints, nil)
	fkey := "bench-floor-" + driver.NewToken()
	floor := func() {
		resp, err := fcli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(fkey), "=", 0)).
			Then(clientv3.OpPut(fkey, driver.NewToken(), clientv3.WithLease(s.Lease()))).
			Commit()
		require.NoError(b, err)
		require.True(b, resp.Succeeded)
		resp, err = fcli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(fkey), "=", resp.Header.Revision)).
			Then(clientv3.OpDelete(fkey)).
			Commit()
		require.NoError(b, err)
		require.True(b, resp.Succeeded)
	}
	ours() // grants the lease that later pairs reuse
	mutex()
	floor()
	var tOurs, tMutex, tFloor time.Duration
	for b.Loop() {
		t0 := time.Now()
		ours()
		t1 := time.Now()
		mutex()
		t2 := time.Now()
		floor()
		tOurs += t1.Sub(t0)
		tMutex += t2.Sub(t1)
		tFloor += time.Since(t2)
	}
	b.ReportMetric(float64(tOurs.Nanoseconds())/float64(b.N), "ours-ns/op")
	b.ReportMetric(float64(tMutex.Nanoseconds())/float64(b.N), "mutex-ns/op")
	b.ReportMetric(float64(tFloor.Nanoseconds())/float64(b.N), "floor-ns/op")
	b.ReportMetric(float64(tOurs)/float64(tMutex), "ours/mutex")
	b.ReportMetric(float64(tOurs)/float64(tFloor), "ours/floor")
}

// runParallel16 runs the op that newOp returns for each of 16 goroutines.
func runParallel16(b *testing.B, c *rttCounter, newOp func() func()) {
	b.SetParallelism((16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	before := c.Load()
	b.ResetTimer()
	cpu := startCPU()
	b.RunParallel(func(pb *testing.PB) {
		op := newOp()
		for pb.Next() {
			op()
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(c.Load()-before)/float64(b.N), "rtt/op")
	cpu.report(b, b.N)
}

func runUncontended(b *testing.B, c *rttCounter, op func()) {
	before, n := c.Load(), 0
	cpu := startCPU()
	for b.Loop() {
		op()
		n++
	}
	b.ReportMetric(float64(c.Load()-before)/float64(n), "rtt/op")
	cpu.report(b, n)
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
		pfx := "bench-mutex-" + driver.NewToken()
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

// cpuMeter measures the CPU time that the benchmark's process (the clients) and the
// etcd member spent, which the load of other processes on the machine changes far
// less than the wall time.
type cpuMeter struct{ cli, srv time.Duration }

func startCPU() cpuMeter { return cpuMeter{cli: selfCPU(), srv: procCPU(etcdSrv.Pid())} }

// report reports the CPU time per op of the clients and of the server.
func (m cpuMeter) report(b *testing.B, n int) {
	if n == 0 {
		return
	}
	b.ReportMetric(float64((selfCPU()-m.cli).Microseconds())/float64(n), "cli-us/op")
	if srv := procCPU(etcdSrv.Pid()); srv > 0 {
		b.ReportMetric(float64((srv-m.srv).Microseconds())/float64(n), "srv-us/op")
	}
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU returns the user and system time of process pid from /proc (0 when it
// cannot tell), in clock ticks of 10ms.
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command, which is in parentheses: utime and stime are
	// the 14th and 15th fields of the line.
	i := strings.LastIndexByte(string(data), ')')
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond
}
