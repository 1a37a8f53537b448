package etcdlock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/internal/faultproxy"
	"github.com/distlock/distlock/internal/testenv"
)

// harness makes conformance clients of the cluster whose members are members: each
// a Locker on its own clientv3.Client, which reaches member i mod len(members)
// through its own fault proxy. pause and restart act on every member.
type harness struct {
	members []*testenv.Server
	pause   func(t *testing.T)
	resume  func(t *testing.T)
	restart func(t *testing.T)

	mu   sync.Mutex
	next int
}

func (h *harness) newClient(t *testing.T) conformance.Client {
	h.mu.Lock()
	member := h.members[h.next%len(h.members)]
	h.next++
	h.mu.Unlock()
	p, err := faultproxy.New(member.Addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cli := newClient(t, []string{p.Addr()}, nil) // closed before the proxy (cleanups run last-in first-out)
	t.Cleanup(func() { p.Close() })
	t.Cleanup(func() { cli.Close() })
	return conformance.Client{
		Locker: etcdlock.New(cli, &etcdlock.Options{Prefix: "conformance/", Owner: t.Name()}),
		// Close the client without revoking anything: the lease expires by its ttl
		// on the server.
		Crash: func() { cli.Close() },
		Partition: func() func() {
			p.Blackhole()
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
	if h.members[0].External() {
		// Servers from DISTLOCK_ETCD_ENDPOINTS cannot be signalled: the suite
		// reports these faults as not run.
		hh.Faults = conformance.Faults{}
	}
	return hh
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
	}
	conformance.Run(t, h.Harness())
}
