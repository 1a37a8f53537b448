package conformance

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
)

// RunBenchmarks measures the backend h describes with the workloads every backend is
// compared on, as sub-benchmarks of b:
//
//   - Uncontended: TryLock+Unlock of a fresh key by one client; ns/op is one pair.
//   - UncontendedParallel: the same from 8 goroutines per CPU sharing one client.
//   - Handoff: 16 clients (as 16 processes would) take one key in turn with
//     distlock.Lock (the backend's Waiter when it has one) and release it at once;
//     ns/op is one acquisition, and the metrics gap-p50-ms and gap-p99-ms are the time
//     from an Unlock to the next acquisition's return.
//
// Only NewClient and Caps.MinTTL of h are used; no faults are injected.
func RunBenchmarks(b *testing.B, h Harness) {
	if h.NewClient == nil {
		b.Fatalf("%s: Harness.NewClient is nil", rHarness)
	}
	ttl := max(h.Caps.MinTTL, 30*time.Second)
	b.Run("Uncontended", func(b *testing.B) {
		c := h.NewClient(b)
		prefix := "bench-" + driver.NewToken()[:10] + "-"
		ctx := context.Background()
		i := 0
		for b.Loop() {
			pair(b, ctx, c, prefix+strconv.Itoa(i), ttl)
			i++
		}
	})
	b.Run("UncontendedParallel", func(b *testing.B) {
		c := h.NewClient(b)
		prefix := "bench-" + driver.NewToken()[:10] + "-"
		var n atomic.Int64
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				pair(b, ctx, c, prefix+strconv.FormatInt(n.Add(1), 10), ttl)
			}
		})
	})
	b.Run("Handoff", func(b *testing.B) { handoff(b, h, ttl) })
}

func pair(b *testing.B, ctx context.Context, c Client, key string, ttl time.Duration) {
	lease, err := c.TryLock(ctx, key, ttl)
	if err != nil {
		b.Fatalf("TryLock(%s): %v", short(key), err)
	}
	if err := c.Unlock(ctx, lease); err != nil {
		b.Fatalf("Unlock(%s): %v", short(key), err)
	}
}

// handoff runs b.N acquisitions of one key by 16 clients. A client that released
// the key queues again only once another has taken it, so that every acquisition
// is a hand-off to a client that was already waiting.
func handoff(b *testing.B, h Harness, ttl time.Duration) {
	const clients = 16
	cs := make([]Client, clients)
	for i := range cs {
		cs[i] = h.NewClient(b)
	}
	key := "bench-handoff-" + driver.NewToken()[:10]
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	var (
		mu       sync.Mutex
		acquired int
		handed   = make(chan struct{}) // closed, and replaced, at every acquisition
		released time.Time             // when the latest holder called Unlock
		gaps     []time.Duration
		failed   atomic.Pointer[error]
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		if ctx.Err() == nil {
			failed.CompareAndSwap(nil, &err)
			cancel()
		}
	}
	b.ResetTimer()
	for _, c := range cs {
		wg.Go(func() {
			for ctx.Err() == nil {
				lease, err := distlock.Lock(ctx, c.Locker, key, ttl, nil)
				if err != nil {
					fail(err)
					return
				}
				now := time.Now()
				mu.Lock()
				if !released.IsZero() {
					gaps = append(gaps, now.Sub(released))
				}
				acquired++
				done := acquired >= b.N
				close(handed)
				handed = make(chan struct{})
				next := handed
				released = time.Now()
				mu.Unlock()
				if done {
					cancel() // the others stop waiting
				}
				if err := c.Unlock(context.WithoutCancel(ctx), lease); err != nil {
					fail(err)
					return
				}
				select { // queue again once another client has the key
				case <-next:
				case <-ctx.Done():
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatalf("handoff: %v", *err)
	}
	if len(gaps) > 0 {
		slices.Sort(gaps)
		b.ReportMetric(ms(gaps[len(gaps)/2]), "gap-p50-ms")
		b.ReportMetric(ms(gaps[min(len(gaps)-1, len(gaps)*99/100)]), "gap-p99-ms")
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
