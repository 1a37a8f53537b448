package etcdlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/faultproxy"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/stretchr/testify/require"
)

// harness makes conformance clients of the cluster whose members are members: each
// a Locker on its own clientv3.Client, which reaches member i mod len(members)
// through its own fault proxy. pause and restart act on every member.
type harness struct {
	members []*testenv.Server
	pause   func(t *testing.T)
	resume  func(t *testing.T)
	restart func(t *testing.T)
	// cluster, when set, is the proxied cluster whose members are members: its
	// faults inside the cluster (Isolate, ChangeLeader, LoseData) are tested too.
	cluster *testenv.EtcdCluster

	mu   sync.Mutex
	next int
}

func (h *harness) newClient(t testing.TB) conformance.Client {
	h.mu.Lock()
	i := h.next % len(h.members)
	member := h.members[i]
	h.next++
	h.mu.Unlock()
	p, err := faultproxy.New(member.Addr(), nil)
	require.NoError(t, err)
	cli := newClient(t, []string{p.Addr()}, nil) // closed before the proxy (cleanups run last-in first-out)
	t.Cleanup(func() { p.Close() })
	t.Cleanup(func() { cli.Close() })
	l := newLocker(t, cli, &etcdlock.Options{Prefix: "conformance/", Owner: t.Name()}) // closed before the client
	var isolate func() func()
	if h.cluster != nil {
		isolate = func() func() { return h.cluster.Isolate(t, i) }
	}
	return conformance.Client{
		IsolateServer: isolate,
		Locker:        l,
		// Close the client without revoking anything: the lease expires by its ttl
		// on the server.
		Crash: func() { cli.Close() },
		Partition: func() func() {
			p.Stall() // gRPC keeps per-connection state that lost bytes would break
			return p.Heal
		},
		Delay: func(d time.Duration) func() {
			p.Delay(d)
			return func() { p.Delay(0) }
		},
	}
}

func (h *harness) Harness() conformance.Harness {
	hh := conformance.Harness{
		NewClient: h.newClient,
		Caps: conformance.Capabilities{
			// etcd leases have whole seconds, and these members' smallest is 1s
			// (testenv.EtcdMinLeaseTTL).
			MinTTL: testenv.EtcdMinLeaseTTL,
			// The server checks lease expiry every 500ms, then deletes the key
			// through raft.
			Grace:     time.Second,
			MaxKeyLen: etcdlock.MaxKeyLen,
		},
		Faults: conformance.Faults{
			PauseServer: func(t *testing.T) func() {
				h.pause(t)
				return func() { h.resume(t) }
			},
			RestartServer: h.restart,
		},
	}
	if c := h.cluster; c != nil {
		hh.Faults.ChangeLeader = func(t *testing.T) { c.ChangeLeader(t) }
		// The leader loses its data: a new election, and a member that rejoins
		// empty.
		hh.Faults.LoseMinority = func(t *testing.T) { c.LoseData(t, h.leader(t)) }
	}
	if h.members[0].External() {
		// Servers from DISTLOCK_ETCD_ENDPOINTS cannot be signalled: the suite
		// reports these faults as not run.
		hh.Faults = conformance.Faults{}
	}
	return hh
}

// leader returns the index of the cluster's current leader.
func (h *harness) leader(t *testing.T) int {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	l, err := h.cluster.WaitLeader(ctx)
	if err != nil {
		t.Fatalf("harness: no etcd leader: %v", err)
	}
	for i, m := range h.members {
		if m == l {
			return i
		}
	}
	t.Fatalf("harness: leader %v is not a member", l)
	return 0
}

func TestConformance(t *testing.T) {
	h := &harness{
		members: []*testenv.Server{etcdSrv},
		pause:   func(t *testing.T) { etcdSrv.Pause(t) },
		resume:  func(t *testing.T) { etcdSrv.Resume(t) },
		restart: func(t *testing.T) { etcdSrv.Restart(t) },
	}
	conformance.Run(t, h.Harness())
}

func TestConformanceCluster(t *testing.T) {
	c := etcdCluster
	h := &harness{
		members: c.Members,
		pause:   func(t *testing.T) { c.Pause(t) },
		resume:  func(t *testing.T) { c.Resume(t) },
		restart: func(t *testing.T) { c.Restart(t) },
		cluster: c,
	}
	conformance.Run(t, h.Harness())
}
