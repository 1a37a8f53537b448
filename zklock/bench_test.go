package zklock_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/zklock"
)

// The benchmarks compare zklock with go-zookeeper's own recipe, zk.Lock, on the
// standalone server: an uncontended TryLock+Unlock (zk.Lock+Unlock), and the handoff
// of one key among 16 clients that each loop Lock, Unlock (ns/op per acquisition).
// Every client has its own session, as separate processes would.
//
// Compare like with like. The suite's Uncontended takes a fresh key for every pair,
// whose node does not exist yet: four round trips (a multi that finds no key node,
// the key node's create, the multi that creates the lock node and returns the key
// node's stat, the delete; TestRequestsPerPair). On a key whose node exists it is
// two (the multi, the delete), against zk.Lock's three (create, listing, delete). So
// Conformance/Uncontended compares with Peer/UncontendedFresh, Peer/Uncontended (one
// path) with UncontendedOneKey, Peer/UncontendedParallel (16 goroutines, a path each)
// with UncontendedParallel, and Peer/Handoff with Handoff (16 clients, each holding
// the key for handoffHold; gap-p50-ms is the time from an Unlock's call to the next
// acquisition: zklock's woken waiter holds the key already, zk.Lock's lists the
// children first).
//
// Every benchmark first warms the server up (warmUp): the first few hundred pairs
// after TestMain started the servers ran about twice as slow as later ones (a JVM
// that has not compiled ZooKeeper's code yet, on a machine still busy starting the
// ensemble), which made whichever benchmark ran first look slower.

// BenchmarkConformance measures zklock with the suite's workloads, on the standalone
// server; BenchmarkPeer measures go-zookeeper's zk.Lock the same way.
// Its clients connect directly, not through the conformance harness's fault proxies.
func BenchmarkConformance(b *testing.B) {
	warmUp(b)
	conformance.RunBenchmarks(b, conformance.Harness{NewClient: func(t testing.TB) conformance.Client {
		return conformance.Client{Locker: newClient(t, standaloneAddrs(), sessionTimeout, nil, false).l}
	}})
}

// BenchmarkUncontendedOneKey is TryLock+Unlock of one key, the workload of
// Peer/Uncontended.
func BenchmarkUncontendedOneKey(b *testing.B) {
	warmUp(b)
	l := newClient(b, standaloneAddrs(), sessionTimeout, nil, false).l
	key := "bench-one-" + driver.NewToken()[:10]
	for b.Loop() {
		pair(b, l, key)
	}
}

// BenchmarkUncontendedParallel is TryLock+Unlock by 16 goroutines sharing one
// Locker, each on a key of its own, the workload of Peer/UncontendedParallel (W1 with
// 16 goroutines).
func BenchmarkUncontendedParallel(b *testing.B) {
	warmUp(b)
	l := newClient(b, standaloneAddrs(), sessionTimeout, nil, false).l
	prefix := "bench-par-" + driver.NewToken()[:10] + "-"
	var n atomic.Int64
	b.SetParallelism(parallel)
	b.RunParallel(func(pb *testing.PB) {
		key := prefix + strconv.FormatInt(n.Add(1), 10)
		for pb.Next() {
			pair(b, l, key)
		}
	})
}

// BenchmarkHandoff is the handoff of one key among 16 Lockers, each on its own
// session, that loop distlock.Lock, Unlock: the workload of Peer/Handoff.
func BenchmarkHandoff(b *testing.B) {
	warmUp(b)
	key := "bench-handoff-" + driver.NewToken()[:10]
	lockers := make([]func() func(), waiters)
	for i := range lockers {
		l := newClient(b, standaloneAddrs(), sessionTimeout, nil, false).l
		lockers[i] = func() func() {
			ctx := context.Background()
			lease, err := distlock.Lock(ctx, l, key, 30*time.Second, nil)
			if err != nil {
				b.Error(err)
				return nil
			}
			return func() {
				if err := l.Unlock(ctx, lease); err != nil {
					b.Error(err)
				}
			}
		}
	}
	handoff(b, lockers)
}

func BenchmarkPeer(b *testing.B) {
	warmUp(b)
	b.Run("Uncontended", func(b *testing.B) {
		conn := connect(b, standaloneAddrs(), sessionTimeout)
		defer conn.Close()
		lk := zk.NewLock(conn, "/bench-zk-lock/"+driver.NewToken(), zk.WorldACL(zk.PermAll))
		for b.Loop() {
			if err := lk.Lock(); err != nil {
				b.Fatal(err)
			}
			if err := lk.Unlock(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("UncontendedParallel", func(b *testing.B) {
		conn := connect(b, standaloneAddrs(), sessionTimeout)
		defer conn.Close()
		prefix := "/bench-zk-lock/" + driver.NewToken()[:10] + "-"
		var n atomic.Int64
		b.SetParallelism(parallel)
		b.RunParallel(func(pb *testing.PB) {
			lk := zk.NewLock(conn, prefix+strconv.FormatInt(n.Add(1), 10), zk.WorldACL(zk.PermAll))
			for pb.Next() {
				if err := lk.Lock(); err != nil {
					b.Error(err)
					return
				}
				if err := lk.Unlock(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	// A fresh path for every pair, as the suite's Uncontended takes a fresh key:
	// zk.Lock creates the missing parents (persistent nodes) first.
	b.Run("UncontendedFresh", func(b *testing.B) {
		conn := connect(b, standaloneAddrs(), sessionTimeout)
		defer conn.Close()
		prefix := "/bench-zk-lock/" + driver.NewToken()[:10] + "-"
		i := 0
		for b.Loop() {
			lk := zk.NewLock(conn, prefix+strconv.Itoa(i), zk.WorldACL(zk.PermAll))
			i++
			if err := lk.Lock(); err != nil {
				b.Fatal(err)
			}
			if err := lk.Unlock(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Handoff", func(b *testing.B) {
		path := "/bench-zk-lock/" + driver.NewToken()
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

// handoffHold is how long a handoff benchmark's holder keeps the key, as
// benchmarks' W2 does.
const handoffHold = time.Millisecond

// parallel times GOMAXPROCS is the goroutines of the Parallel benchmarks: 16 on the
// 2-core machine that the benchmarks' numbers come from.
const parallel = 8

// warmServers is how many TryLock+Unlock pairs warmUp makes, half on fresh keys, half
// on one key: enough that a later one takes no longer than the benchmarks' steady
// state.
const warmServers = 1500

// warmed makes warmUp run once per process, which the servers live as long as.
var warmed sync.Once

// warmUp makes warmServers pairs on the standalone server, once per process, before
// the calling benchmark's timer starts.
func warmUp(b *testing.B) {
	b.Helper()
	warmed.Do(func() {
		l := newClient(b, standaloneAddrs(), sessionTimeout, nil, false).l
		prefix := "bench-warm-" + driver.NewToken()[:10] + "-"
		for i := range warmServers {
			key := prefix
			if i%2 == 0 {
				key += strconv.Itoa(i)
			}
			pair(b, l, key)
		}
	})
	b.ResetTimer()
}

// pair makes one TryLock+Unlock of key.
func pair(b *testing.B, l *zklock.Locker, key string) {
	ctx := context.Background()
	lease, err := l.TryLock(ctx, key, 30*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Unlock(ctx, lease); err != nil {
		b.Fatal(err)
	}
}

// handoff runs b.N acquisitions of one key by len(lockers) goroutines; each calls
// lock and then unlock. A goroutine that released the key asks again only once
// another has taken it, so that every acquisition is a handoff to a waiter (a
// releaser that asked again at once could win its own release back). It reports the
// gap from a holder's call of unlock to the next acquisition: gap-p50-ms.
func handoff(b *testing.B, lockers []func() (unlock func())) {
	var (
		mu       sync.Mutex
		acquired int
		handed   = make(chan struct{}) // closed, and replaced, at every acquisition
		released time.Time             // when the latest holder called unlock
		gaps     []time.Duration
		stop     = make(chan struct{})
		stopOnce sync.Once
		wg       sync.WaitGroup
	)
	b.ResetTimer()
	for _, lock := range lockers {
		wg.Go(func() {
			for {
				unlock := lock()
				if unlock == nil {
					return
				}
				mu.Lock()
				if !released.IsZero() {
					gaps = append(gaps, time.Since(released))
				}
				acquired++
				done := acquired >= b.N
				close(handed)
				handed = make(chan struct{})
				next := handed
				mu.Unlock()
				time.Sleep(handoffHold) // the critical section
				mu.Lock()
				released = time.Now()
				mu.Unlock()
				unlock()
				if done {
					// The others still waiting take their turn, and stop then.
					stopOnce.Do(func() { close(stop) })
					return
				}
				select {
				case <-next:
				case <-stop:
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	slices.Sort(gaps)
	if len(gaps) > 0 {
		b.ReportMetric(float64(gaps[len(gaps)/2])/1e6, "gap-p50-ms")
	}
}

// BenchmarkRenewMany renews 2,000 leases of one Locker at once, as distlock.Hold
// does with many leases (W5): time and server requests per renewal, with Renew's
// checks gathered into shared multis (batched) and with one multi per check (each).
func BenchmarkRenewMany(b *testing.B) {
	warmUp(b)
	const n = 2000
	for _, mode := range []struct {
		name string
		each bool
	}{{"batched", false}, {"each", true}} {
		b.Run(mode.name, func(b *testing.B) {
			ctx := context.Background()
			w := newWire()
			opts := *quiet
			opts.Dialer = w.dial
			s, err := zklock.Connect(ctx, standaloneAddrs(), 30*time.Second, &opts)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			l, err := zklock.New(s, &zklock.Options{TickTime: testenv.ZooKeeperTickTime})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = l.Close() }()
			l.SetCheckEach(mode.each)
			prefix := "bench-renew-" + driver.NewToken()[:10] + "-"
			leases := make([]distlock.Lease, n)
			for i := range leases {
				if leases[i], err = l.TryLock(ctx, prefix+strconv.Itoa(i), time.Minute); err != nil {
					b.Fatal(err)
				}
			}
			w.reset()
			rounds := 0
			for b.Loop() {
				var wg sync.WaitGroup
				for i := range leases {
					wg.Go(func() {
						r, err := l.Renew(ctx, leases[i], time.Minute)
						if err != nil {
							b.Error(err)
							return
						}
						leases[i] = r
					})
				}
				wg.Wait()
				rounds++
			}
			_, requests, _ := w.snapshot()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rounds*n), "ns/renewal")
			b.ReportMetric(float64(requests)/float64(rounds*n), "requests/renewal")
		})
	}
}
