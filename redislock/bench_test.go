package redislock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/conformance"
)

// The benchmarks compare an uncontended TryLock+Unlock with its floor: the same two
// round trips issued raw with go-redis (SET NX PX, then an EVAL compare-and-delete),
// on the same server and client settings, in the same run:
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
	key := "bench-" + distlock.NewToken()[:8]
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

// BenchmarkRawSetNXEvalDel: the floor, raw go-redis: SET key token NX PX, then EVAL
// compare-and-delete.
func BenchmarkRawSetNXEvalDel(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	key := "bench-raw-" + distlock.NewToken()[:8]
	token := distlock.NewToken()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ok, err := c.SetNX(ctx, key, token, benchTTL).Result()
		if err != nil || !ok {
			b.Fatalf("SET NX: %v, %v", ok, err)
		}
		n, err := c.Eval(ctx, compareAndDelete, []string{key}, token).Int64()
		if err != nil || n != 1 {
			b.Fatalf("EVAL compare-and-delete: %v, %v", n, err)
		}
	}
}

// BenchmarkInterleaved runs ours and the raw floor alternately, one iteration each,
// and reports both times and their ratio: on a shared, noisy machine this ratio is
// steadier than that of the two benchmarks above, which run seconds apart. Ours runs
// with context.Background and with a cancellable context.
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
	key := "bench-" + distlock.NewToken()[:8]
	rawKey := "bench-raw-" + distlock.NewToken()[:8]
	token := distlock.NewToken()
	lease, err := l.TryLock(ctx, key, benchTTL)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Unlock(ctx, lease); err != nil {
		b.Fatal(err)
	}
	_ = c.Eval(ctx, compareAndDelete, []string{rawKey}, token).Err()
	var ours, raw time.Duration
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
		if ok, err := c.SetNX(context.Background(), rawKey, token, benchTTL).Result(); err != nil || !ok {
			b.Fatalf("SET NX: %v, %v", ok, err)
		}
		if n, err := c.Eval(context.Background(), compareAndDelete, []string{rawKey}, token).Int64(); err != nil || n != 1 {
			b.Fatalf("EVAL compare-and-delete: %v, %v", n, err)
		}
		t2 := time.Now()
		ours += t1.Sub(t0)
		raw += t2.Sub(t1)
	}
	b.ReportMetric(float64(ours.Nanoseconds())/float64(b.N), "ours-ns/op")
	b.ReportMetric(float64(raw.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(float64(ours)/float64(raw), "ours/raw")
}

// BenchmarkWaitFreeKey: the fixed cost of one Wait on a key that is free: PTTL on a
// subscription that the Locker's pub/sub connection keeps (the first Wait dials
// and subscribes).
func BenchmarkWaitFreeKey(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := newLockerOn(b, benchClient(b), nil)
	key := "bench-wait-" + distlock.NewToken()[:8]
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
// key of its own: ours (with a cancellable ctx) and the raw floor, on one client
// each.
func BenchmarkParallel(b *testing.B) {
	b.Run("ours", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		benchParallel(b, ctx)
	})
	b.Run("ours-background", func(b *testing.B) { benchParallel(b, context.Background()) })
	b.Run("raw", func(b *testing.B) {
		c := benchClient(b)
		b.SetParallelism(8)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			key := "bench-par-raw-" + distlock.NewToken()[:8]
			token := distlock.NewToken()
			for pb.Next() {
				if ok, err := c.SetNX(context.Background(), key, token, benchTTL).Result(); err != nil || !ok {
					b.Errorf("SET NX: %v, %v", ok, err)
					return
				}
				if n, err := c.Eval(context.Background(), compareAndDelete, []string{key}, token).Int64(); err != nil || n != 1 {
					b.Errorf("EVAL compare-and-delete: %v, %v", n, err)
					return
				}
			}
		})
	})
}

func benchParallel(b *testing.B, ctx context.Context) {
	l := newLockerOn(b, benchClient(b), nil)
	b.SetParallelism(8)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		key := "bench-par-" + distlock.NewToken()[:8]
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
