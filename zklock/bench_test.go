package zklock_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/conformance"
)

// The benchmarks compare zklock with go-zookeeper's own recipe, zk.Lock, on the
// standalone server: an uncontended TryLock+Unlock (zk.Lock+Unlock), and the handoff
// of one key among 16 clients that each loop Lock, Unlock (ns/op per acquisition).
// Every client has its own session, as separate processes would.

// BenchmarkConformance measures zklock with the suite's workloads, on the standalone
// server; BenchmarkPeer measures go-zookeeper's zk.Lock the same way.
// Its clients connect directly, not through the conformance harness's fault proxies.
func BenchmarkConformance(b *testing.B) {
	conformance.RunBenchmarks(b, conformance.Harness{NewClient: func(t testing.TB) conformance.Client {
		return conformance.Client{Locker: newClient(t, standaloneAddrs(), sessionTimeout, nil, false).l}
	}})
}

func BenchmarkPeer(b *testing.B) {
	b.Run("Uncontended", func(b *testing.B) {
		conn := connect(b, standaloneAddrs(), sessionTimeout)
		defer conn.Close()
		lk := zk.NewLock(conn, "/bench-zk-lock/"+distlock.NewToken(), zk.WorldACL(zk.PermAll))
		for b.Loop() {
			if err := lk.Lock(); err != nil {
				b.Fatal(err)
			}
			if err := lk.Unlock(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Handoff", func(b *testing.B) {
		path := "/bench-zk-lock/" + distlock.NewToken()
		lockers := make([]func() func(), waiters)
		for i := range lockers {
			conn := connect(b, standaloneAddrs(), sessionTimeout)
			b.Cleanup(conn.Close)
			lk := zk.NewLock(conn, path, zk.WorldACL(zk.PermAll))
			lockers[i] = func() func() {
				if err := lk.Lock(); err != nil {
					b.Error(err)
					return nil
				}
				return func() {
					if err := lk.Unlock(); err != nil {
						b.Error(err)
					}
				}
			}
		}
		handoff(b, lockers)
	})
}

const waiters = 16

// handoff runs b.N acquisitions of one key by waiters goroutines; each calls lock and
// then unlock.
func handoff(b *testing.B, lockers []func() (unlock func())) {
	var acquired atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for _, lock := range lockers {
		wg.Go(func() {
			for {
				unlock := lock()
				if unlock == nil {
					return
				}
				n := acquired.Add(1)
				unlock()
				if n >= int64(b.N) {
					return
				}
			}
		})
	}
	// A goroutine stops after an acquisition that reaches b.N; the others still
	// waiting take their turn first, so a run makes up to waiters-1 extra ones.
	wg.Wait()
	b.StopTimer()
}
