package sqltest

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/faultproxy"
)

// BenchTryLockUnlock measures an uncontended TryLock followed by Unlock of one key.
func BenchTryLockUnlock(b *testing.B, l distlock.Locker) {
	key := Key("bench")
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

// BenchRoundTrips measures an uncontended TryLock followed by Unlock through p,
// which adds 20ms each way once l is warm: the metric roundtrips/op, ns/op divided
// by 40ms, counts the round trips per TryLock+Unlock (2 when each is one
// statement), whatever the machine's load.
func BenchRoundTrips(b *testing.B, p *faultproxy.Proxy, l distlock.Locker) {
	const oneWay = 20 * time.Millisecond
	key := Key("bench")
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

// BenchParallel measures uncontended TryLock+Unlock pairs from g goroutines sharing
// l, each on a key of its own (the workload W1 of package benchmarks); see
// BenchParallelFunc.
func BenchParallel(b *testing.B, l distlock.Locker, g int) {
	BenchParallelFunc(b, g, func(ctx context.Context, key string) error {
		lease, err := l.TryLock(ctx, key, 10*time.Second)
		if err != nil {
			return err
		}
		return l.Unlock(ctx, lease)
	})
}

// BenchParallelFunc measures pair (a lock and an unlock of key) from g goroutines,
// each on a key of its own: ns/op is one pair's share of the wall time; the
// metrics pairs/s, p50-ms and p99-ms are the throughput and the latency
// percentiles of one pair.
func BenchParallelFunc(b *testing.B, g int, pair func(ctx context.Context, key string) error) {
	ctx := b.Context()
	prefix := Key("w1-" + driver.NewToken()[:8] + "-")
	timed := func(key string) time.Duration {
		t0 := time.Now()
		if err := pair(ctx, key); err != nil {
			b.Error(err)
		}
		return time.Since(t0)
	}
	for i := range g { // warm: the rows exist, the connections are open
		timed(prefix + strconv.Itoa(i))
	}
	var (
		next atomic.Int64
		mu   sync.Mutex
		all  []time.Duration
		wg   sync.WaitGroup
	)
	b.ResetTimer()
	for i := range g {
		key := prefix + strconv.Itoa(i)
		wg.Go(func() {
			var ds []time.Duration
			for next.Add(1) <= int64(b.N) && !b.Failed() {
				ds = append(ds, timed(key))
			}
			mu.Lock()
			all = append(all, ds...)
			mu.Unlock()
		})
	}
	wg.Wait()
	b.StopTimer()
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(len(all))/b.Elapsed().Seconds(), "pairs/s")
		b.ReportMetric(float64(all[len(all)/2])/1e6, "p50-ms")
		b.ReportMetric(float64(all[min(len(all)-1, len(all)*99/100)])/1e6, "p99-ms")
	}
}
