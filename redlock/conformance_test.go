package redlock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/internal/faultproxy"
	"github.com/distlock/distlock/redlock"
)

// A proxiedClient is one Locker of the harness with what its faults act on: its five
// go-redis clients and the fault proxies (one in front of each node) that all their
// connections go through.
type proxiedClient struct {
	clients []redis.UniversalClient
	proxies []*faultproxy.Proxy
}

// registry maps the Lockers a harness made to their proxiedClients.
type registry struct {
	mu sync.Mutex
	m  map[distlock.Locker]*proxiedClient
}

func (r *registry) add(l distlock.Locker, c *proxiedClient) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = make(map[distlock.Locker]*proxiedClient)
	}
	r.m[l] = c
}

func (r *registry) get(t *testing.T, l distlock.Locker) *proxiedClient {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.m[l]
	if c == nil {
		t.Fatalf("harness: Locker %p was not made by this harness", l)
	}
	return c
}

// proxied returns a Locker over the five nodes whose clients each dial through a
// fault proxy of their own, all closed at t's cleanup.
func proxied(t *testing.T, opts *redlock.Options) (*redlock.Locker, *proxiedClient) {
	t.Helper()
	pc := &proxiedClient{}
	addrs := make([]string, len(nodes))
	for i, s := range nodes {
		p, err := faultproxy.New(s.Addr(), nil)
		if err != nil {
			t.Fatalf("harness: faultproxy.New(%s): %v", s.Addr(), err)
		}
		t.Cleanup(func() { _ = p.Close() })
		pc.proxies = append(pc.proxies, p)
		addrs[i] = p.Addr()
	}
	// Registered after the proxies' cleanups, so the clients close first.
	pc.clients = clients(t, addrs)
	l, err := redlock.New(pc.clients, opts)
	if err != nil {
		t.Fatalf("harness: redlock.New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() }) // before the clients close
	return l, pc
}

// harnessOptions are the options of the conformance clients. NodeTimeout is raised
// from its default (200ms) to 1s because the suite delays every request and reply by
// 100ms (LeaseExpires/DelayedReply) and expects a long-ttl TryLock to succeed. A
// call's timeout is still at most a tenth of its ttl.
var harnessOptions = &redlock.Options{NodeTimeout: time.Second}

func TestConformance(t *testing.T) {
	reg := &registry{}
	conformance.Run(t, conformance.Harness{
		NewClient: func(t *testing.T) distlock.Locker {
			l, pc := proxied(t, harnessOptions)
			reg.add(l, pc)
			return l
		},
		Caps: conformance.Capabilities{
			// A call gives each node a tenth of its ttl. Under -race on a loaded
			// machine, a fresh client's first call (dial, handshake, NOSCRIPT and
			// EVAL) through a fault proxy can take tens of milliseconds, and a burst
			// of them (the contention test starts 24 clients' first calls at once)
			// more than 400ms: a ttl of 2s leaves each node 200ms, and the
			// contention test's 8s ttl 800ms.
			MinTTL:    2 * time.Second,
			MaxKeyLen: redlock.DefaultMaxKeyLen,
			Waiter:    true,
			Inspector: true,
		},
		Faults: conformance.Faults{
			Crash: func(t *testing.T, l distlock.Locker) {
				for _, c := range reg.get(t, l).clients {
					_ = c.Close()
				}
			},
			Partition: func(t *testing.T, l distlock.Locker) func() {
				pc := reg.get(t, l)
				for _, p := range pc.proxies {
					p.Blackhole()
				}
				return func() {
					for _, p := range pc.proxies {
						p.Heal()
					}
				}
			},
			Delay: func(t *testing.T, l distlock.Locker, d time.Duration) func() {
				pc := reg.get(t, l)
				for _, p := range pc.proxies {
					p.Delay(d)
				}
				return func() {
					for _, p := range pc.proxies {
						p.Delay(0)
					}
				}
			},
			PauseServer: func(t *testing.T) func() {
				for _, s := range nodes {
					s.Pause(t)
				}
				return func() {
					for _, s := range nodes {
						s.Resume(t)
					}
				}
			},
			// The nodes run with appendfsync always, so locks and fences survive.
			RestartServer: func(t *testing.T) {
				for _, s := range nodes {
					s.Restart(t)
				}
			},
		},
	})
}
