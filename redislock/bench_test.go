package redislock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/driver"
)

// The benchmarks compare an uncontended TryLock+Unlock with its floors: the same two
// round trips issued raw with go-redis (SET NX PX, then an EVAL compare-and-delete),
// and the fenced floor (fencedPair), on the same server and client settings, in the
// same run:
//
//	go test -run '^$' -bench . -count 5 ./redislock/

const benchTTL = 30 * time.Second

func benchClient(b *testing.B) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: redisSrv.Addr()})
	b.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
	return c
}

func benchTryLockUnlock(b *testing.B, ctx context.Context) {
	l := newLockerOn(b, benchClient(b), nil)
	key := "bench-" + driver.NewToken()[:8]
	// Load the scripts (the first EVALSHA falls back to EVAL once).
	lease, err := l.TryLock(ctx, key, benchTTL)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Unlock(ctx, lease); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		lease, err := l.TryLock(ctx, key, benchTTL)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx, lease); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTryLockUnlock: ours, with context.Background (calls run on the caller's
// goroutine).
func BenchmarkTryLockUnlock(b *testing.B) { benchTryLockUnlock(b, context.Background()) }

// BenchmarkTryLockUnlockCancelable: ours, with a context that can be cancelled (each
// call runs its command on a goroutine so that it can return when ctx is done).
func BenchmarkTryLockUnlockCancelable(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	benchTryLockUnlock(b, ctx)
}

// compareAndDelete is the usual owner-checked release.
var compareAndDelete = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`

// The fenced floor: what redislock's protocol needs at least, raw (as the matrix's
// "redis raw floor + fence"): a script that sets the lock and increments its fence
// counter, and a compare-and-delete that publishes the release.
var (
	fencedAcquire = redis.NewScript(`if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('INCR', KEYS[2]) end return 0`)
	fencedRelease = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) redis.call('PUBLISH', KEYS[1], ARGV[1]) return 1 end return 0`)
)

// fencedPair runs one fenced floor pair on key with token.
func fencedPair(ctx context.Context, c *redis.Client, key, token string) error {
	if f, err := fencedAcquire.Run(ctx, c, []string{key, key + ":fence"}, token, benchTTL.Milliseconds()).Int64(); err != nil || f <= 0 {
		return fmt.Errorf("fenced acquire: %v, %v", f, err)
	}
	if n, err := fencedRelease.Run(ctx, c, []string{key}, token).Int64(); err != nil || n != 1 {
		return fmt.Errorf("fenced release: %v, %v", n, err)
	}
	return nil
}

// BenchmarkRawSetNXEvalDel: the floor, raw go-redis: SET key token NX PX, then EVAL
// compare-and-delete.
func BenchmarkRawSetNXEvalDel(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	key := "bench-raw-" + driver.NewToken()[:8]
	token := driver.NewToken()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := rawPair(ctx, c, key, token); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInterleaved runs ours, the raw floor and the fenced floor alternately,
// one iteration each, and reports their times and ratios: on a shared, noisy
// machine these ratios are steadier than those of the benchmarks above, which run
// seconds apart. Ours runs with context.Background and with a cancellable context
// (whose calls hand their command to a worker, so that they return when ctx ends:
// what ours/fenced costs beyond the protocol at one goroutine).
func BenchmarkInterleaved(b *testing.B) {
	b.Run("ctx=background", func(b *testing.B) { benchInterleaved(b, context.Background()) })
	b.Run("ctx=cancelable", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		benchInterleaved(b, ctx)
	})
}

func benchInterleaved(b *testing.B, ctx context.Context) {
	l := newLockerOn(b, benchClient(b), nil)
	c := benchClient(b)
	key := "bench-" + driver.NewToken()[:8]
	rawKey := "bench-raw-" + driver.NewToken()[:8]
	fencedKey := "bench-fenced-" + driver.NewToken()[:8]
	token := driver.NewToken()
	lease, err := l.TryLock(ctx, key, benchTTL)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Unlock(ctx, lease); err != nil {
		b.Fatal(err)
	}
	_ = c.Eval(ctx, compareAndDelete, []string{rawKey}, token).Err()
	if err := fencedPair(ctx, c, fencedKey, token); err != nil { // loads the scripts
		b.Fatal(err)
	}
	var ours, raw, fenced time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		lease, err := l.TryLock(ctx, key, benchTTL)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx, lease); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := rawPair(context.Background(), c, rawKey, token); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := fencedPair(context.Background(), c, fencedKey, token); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		ours += t1.Sub(t0)
		raw += t2.Sub(t1)
		fenced += t3.Sub(t2)
	}
	b.ReportMetric(float64(ours.Nanoseconds())/float64(b.N), "ours-ns/op")
	b.ReportMetric(float64(raw.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(float64(fenced.Nanoseconds())/float64(b.N), "fenced-ns/op")
	b.ReportMetric(float64(ours)/float64(raw), "ours/raw")
	b.ReportMetric(float64(ours)/float64(fenced), "ours/fenced")
}

// BenchmarkWaitFreeKey: the fixed cost of one Wait on a key that is free: PTTL on a
// subscription that the Locker's pub/sub connection keeps (the first Wait dials
// and subscribes).
func BenchmarkWaitFreeKey(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := newLockerOn(b, benchClient(b), nil)
	key := "bench-wait-" + driver.NewToken()[:8]
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := l.Wait(ctx, key); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConformance measures redislock with the conformance suite's workloads:
// uncontended pairs, and a hand-off among 16 Lockers (each with a client of its own)
// that wait through pub/sub, with the gap from an Unlock to the next acquisition.
func BenchmarkConformance(b *testing.B) {
	conformance.RunBenchmarks(b, conformance.Harness{NewClient: func(t testing.TB) conformance.Client {
		c := redis.NewClient(&redis.Options{Addr: redisSrv.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		return conformance.Client{Locker: newLockerOn(t, c, nil)}
	}})
}

// BenchmarkParallel: W1 with 16 goroutines (SetParallelism(8) on 2 CPUs), each on a
// key of its own: ours (with a cancellable ctx), the raw floor and the fenced floor,
// on one client each.
func BenchmarkParallel(b *testing.B) {
	b.Run("ours", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		benchParallel(b, ctx)
	})
	b.Run("ours-background", func(b *testing.B) { benchParallel(b, context.Background()) })
	b.Run("fenced", func(b *testing.B) { benchParallelRaw(b, "bench-par-fenced-", fencedPair) })
	b.Run("raw", func(b *testing.B) { benchParallelRaw(b, "bench-par-raw-", rawPair) })
}

// rawPair runs one raw floor pair on key with token.
func rawPair(ctx context.Context, c *redis.Client, key, token string) error {
	if ok, err := c.SetNX(ctx, key, token, benchTTL).Result(); err != nil || !ok {
		return fmt.Errorf("SET NX: %v, %v", ok, err)
	}
	if n, err := c.Eval(ctx, compareAndDelete, []string{key}, token).Int64(); err != nil || n != 1 {
		return fmt.Errorf("EVAL compare-and-delete: %v, %v", n, err)
	}
	return nil
}

// benchParallelRaw is BenchmarkParallel of a floor's pairs, each goroutine on a key
// of its own (prefix and a random suffix).
func benchParallelRaw(b *testing.B, prefix string, pair func(context.Context, *redis.Client, string, string) error) {
	c := benchClient(b)
	b.SetParallelism(8)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		key := prefix + driver.NewToken()[:8]
		token := driver.NewToken()
		for pb.Next() {
			if err := pair(context.Background(), c, key, token); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func benchParallel(b *testing.B, ctx context.Context) {
	l := newLockerOn(b, benchClient(b), nil)
	b.SetParallelism(8)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		key := "bench-par-" + driver.NewToken()[:8]
		for pb.Next() {
			lease, err := l.TryLock(ctx, key, benchTTL)
			if err != nil {
				b.Error(err)
				return
			}
			if err := l.Unlock(ctx, lease); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
