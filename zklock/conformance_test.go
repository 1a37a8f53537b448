package zklock_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/zklock"
)

// harness returns a conformance harness whose clients each have their own session
// with the servers that addrs returns, through fault proxies of their own. pause and
// restart act on the servers.
//
// With ens set, the clients are spread over its nodes, one node each (round-robin),
// so that IsolateServer leaves a holder on the isolated node, and the ensemble's
// faults inside the cluster are tested too.
func harness(addrs func() []string, ens *testenv.Ensemble, pause func(t *testing.T) func(), restart func(t *testing.T)) conformance.Harness {
	var next atomic.Int64
	h := conformance.Harness{
		NewClient: func(t testing.TB) conformance.Client {
			servers := addrs()
			if ens != nil {
				servers = servers[int(next.Add(1))%len(servers):][:1]
			}
			c := newClient(t, servers, sessionTimeout, nil, true)
			var isolate func() func()
			if ens != nil {
				isolate = func() func() { return c.isolate(t) }
			}
			return conformance.Client{
				IsolateServer: isolate,
				Locker:        c.l,
				// Closing the connection ends the session at once (closeSession):
				// the server deletes the session's lock nodes.
				Crash: func() { c.conn.Close() },
				// A cut rather than a blackhole: go-zookeeper waits 10 × 2/3 of the
				// session timeout for a handshake answer, so a blackholed reconnect
				// outlasts the suite's retries after healing. TestBlackholedHolder
				// covers the blackhole.
				Partition: func() func() {
					c.cut()
					return c.heal
				},
				Delay: func(d time.Duration) func() {
					c.delay(d)
					return func() { c.delay(0) }
				},
			}
		},
		Caps: conformance.Capabilities{
			SessionExpiry: true,
			// A partitioned or crashed holder's session expires sessionTimeout after
			// the server last heard from it, rounded up to the server's tick; the rest
			// is for a loaded machine.
			Grace:     sessionTimeout + time.Second,
			MaxKeyLen: zklock.MaxKeyLen,
			// The ttl only caps a lease's Expires here. A TryLock through a proxy on
			// a loaded 3-node ensemble took 112ms once; zklock rightly refuses a
			// lease that expired before its reply, so no test uses a ttl that short.
			MinTTL: 500 * time.Millisecond,
		},
		Faults: conformance.Faults{
			PauseServer:   pause,
			RestartServer: restart,
		},
	}
	if ens != nil {
		h.Faults.ChangeLeader = func(t *testing.T) { ens.ChangeLeader(t) }
		// The leader loses its data: a new election, and a node that rejoins empty.
		h.Faults.LoseMinority = func(t *testing.T) { ens.LoseData(t, leaderIndex(t)) }
	}
	return h
}

func TestConformanceStandalone(t *testing.T) {
	conformance.Run(t, harness(standaloneAddrs, nil,
		func(t *testing.T) func() {
			zkSrv.Pause(t)
			return func() { zkSrv.Resume(t) }
		},
		func(t *testing.T) { zkSrv.Restart(t) },
	))
}

func TestConformanceEnsemble(t *testing.T) {
	conformance.Run(t, harness(ensembleAddrs, zkEns,
		func(t *testing.T) func() {
			for _, s := range zkEns.Nodes {
				s.Pause(t)
			}
			return func() {
				for _, s := range zkEns.Nodes {
					s.Resume(t)
				}
				// Nodes paused one after another may elect a new leader on resume:
				// resume returns, as restart does, once the ensemble serves again.
				ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
				defer cancel()
				if err := zkEns.WaitServing(ctx); err != nil {
					t.Fatalf("ensemble not serving after resume: %v", err)
				}
			}
		},
		restartEnsemble,
	))
}

// restartEnsemble stops every node, starts them all again (concurrently: a node is
// ready only once a quorum has formed) and waits until the ensemble serves.
func restartEnsemble(t *testing.T) {
	t.Helper()
	var wg sync.WaitGroup
	for _, s := range zkEns.Nodes {
		wg.Go(func() {
			if err := s.Stop(); err != nil {
				t.Errorf("stop %s: %v", s, err)
			}
		})
	}
	wg.Wait()
	g := &goTB{TB: t}
	for _, s := range zkEns.Nodes {
		wg.Go(func() { s.Restart(g) })
	}
	wg.Wait()
	if len(g.errs) > 0 {
		t.Fatalf("restart the ensemble: %v", g.errs)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := zkEns.WaitServing(ctx); err != nil {
		t.Fatal(err)
	}
}

// goTB lets a goroutine other than the test's call a testenv method that may fail
// the test: Fatalf records the message and ends the goroutine, and the test reports
// the messages after joining it.
type goTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (g *goTB) Helper() {}

func (g *goTB) Fatalf(format string, args ...any) {
	g.mu.Lock()
	g.errs = append(g.errs, fmt.Sprintf(format, args...))
	g.mu.Unlock()
	runtime.Goexit()
}
