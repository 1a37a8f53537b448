package redlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/redlock"
)

// compareAndDelete is the usual owner-checked release of the raw floor.
var compareAndDelete = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`)

// rawOnAll runs f on every client at once and waits for every answer, as the raw
// floor of the benchmark matrix does.
func rawOnAll(b *testing.B, cs []redis.UniversalClient, f func(c redis.UniversalClient) error) {
	var wg sync.WaitGroup
	errs := make([]error, len(cs))
	for i, c := range cs {
		wg.Go(func() { errs[i] = f(c) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInterleaved runs ours (an uncontended TryLock and Unlock on the five
// nodes, context.Background) and the raw floor (SET NX PX on every node in parallel,
// then a compare-and-delete script on every node in parallel) alternately, one
// iteration each, and reports both times and their ratio, which is steadier on a
// shared machine than two benchmarks run seconds apart:
//
//	go test -run '^$' -bench Interleaved -count 6 ./redlock/ | benchstat -
func BenchmarkInterleaved(b *testing.B) {
	// A generous node timeout: on a loaded machine a round trip can take far more
	// than the default 200ms, and the benchmark measures cost, not timeouts.
	l := newLocker(b, &redlock.Options{NodeTimeout: 2 * time.Second})
	raw := clients(b, nodeAddrs())
	ctx := context.Background()
	key := "bench-" + driver.NewToken()[:8]
	rawKey := "bench-raw-" + driver.NewToken()[:8]
	token := driver.NewToken()
	lease, err := l.TryLock(ctx, key, 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Unlock(ctx, lease); err != nil {
		b.Fatal(err)
	}
	rawOnAll(b, raw, func(c redis.UniversalClient) error {
		return compareAndDelete.Run(ctx, c, []string{rawKey}, token).Err()
	})
	var ours, floor time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		lease, err := l.TryLock(ctx, key, 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx, lease); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		rawOnAll(b, raw, func(c redis.UniversalClient) error { return c.SetNX(ctx, rawKey, token, 10*time.Second).Err() })
		rawOnAll(b, raw, func(c redis.UniversalClient) error {
			return compareAndDelete.Run(ctx, c, []string{rawKey}, token).Err()
		})
		t2 := time.Now()
		ours += t1.Sub(t0)
		floor += t2.Sub(t1)
	}
	b.ReportMetric(float64(ours.Nanoseconds())/float64(b.N), "ours-ns/op")
	b.ReportMetric(float64(floor.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(float64(ours)/float64(floor), "ours/raw")
}
