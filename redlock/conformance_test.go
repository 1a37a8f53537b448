package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/faultproxy"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/redlock"
)

// A proxiedClient is one Locker of the harness with what its faults act on: its five
// go-redis clients and the fault proxies (one in front of each node) that all their
// connections go through.
type proxiedClient struct {
	clients []redis.UniversalClient
	proxies []*faultproxy.Proxy
}

// proxied returns a Locker over the five nodes whose clients each dial through a
// fault proxy of their own, all closed at t's cleanup.
func proxied(t testing.TB, opts *redlock.Options) (*redlock.Locker, *proxiedClient) {
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

// conformanceClient is a conformance client: a Locker over the five nodes, each
// reached through the client's own fault proxy.
func conformanceClient(t testing.TB) conformance.Client {
	l, pc := proxied(t, harnessOptions)
	each := func(f func(p *faultproxy.Proxy)) {
		for _, p := range pc.proxies {
			f(p)
		}
	}
	return conformance.Client{
		Locker: l,
		Crash: func() {
			for _, c := range pc.clients {
				_ = c.Close()
			}
		},
		Partition: func() func() {
			each((*faultproxy.Proxy).Blackhole)
			return func() { each((*faultproxy.Proxy).Heal) }
		},
		Delay: func(d time.Duration) func() {
			each(func(p *faultproxy.Proxy) { p.Delay(d) })
			return func() { each(func(p *faultproxy.Proxy) { p.Delay(0) }) }
		},
	}
}

func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		NewClient: conformanceClient,
		Caps: conformance.Capabilities{
			// A call gives each node a tenth of its ttl. Under -race on a loaded
			// machine, a fresh client's first call (dial, handshake, NOSCRIPT and
			// EVAL) through a fault proxy can take tens of milliseconds, and a burst
			// of them (the contention test starts 24 clients' first calls at once)
			// more than 400ms: a ttl of 2s leaves each node 200ms, and the
			// contention test's 8s ttl 800ms.
			MinTTL:    2 * time.Second,
			MaxKeyLen: redlock.MaxKeyLen,
		},
		Faults: conformance.Faults{
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
			// Two of the five masters restart empty. redlock keeps them out of
			// quorums for 1.1 MaxTTL; when the test ends their quarantine is lifted
			// by hand and an attempt over all five gives them an era, so that the
			// package's later tests start with five masters that count.
			LoseMinority: func(t *testing.T) {
				lost := testenv.RestartMinorityEmpty(t, nodes)
				t.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					for _, s := range lost {
						if _, err := testenv.RedisCommand(ctx, s.Addr(), "DEL", redlock.DefaultPrefix+":quarantine"); err != nil {
							t.Errorf("harness: lift the quarantine of %s: %v", s, err)
						}
					}
					counting(t, newLocker(t, nil), 10*time.Second)
				})
			},
		},
	})
}
