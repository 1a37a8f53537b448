package lockdlock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/examples/ownbackend/lockd"
	"github.com/distlock/distlock/examples/ownbackend/lockdlock"
	"github.com/distlock/distlock/faultproxy"
)

// TestConformance proves lockdlock with the whole suite. Each client talks to the
// server through a faultproxy.Proxy of its own, which is how the suite crashes,
// partitions and delays one client while the others work on; the server-side
// faults act on the server itself.
func TestConformance(t *testing.T) {
	srv := startServer(t)
	conformance.Run(t, harness(srv))
}

// harness describes the backend to the suite: how to make a client (with its
// faults), what the backend promises, and how to break the server.
func harness(srv *lockd.Server) conformance.Harness {
	return conformance.Harness{
		NewClient: func(t testing.TB) conformance.Client {
			p := newProxy(t, srv.Addr())
			l, err := lockdlock.New(p.Addr(), nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() }) // runs before the proxy's Close
			return conformance.Client{
				Locker: l,
				// The process is gone: its connections are reset and it never
				// reaches the server again.
				Crash: func() { p.Cut(); _ = l.Close() },
				// Its packets are lost, both ways, until heal.
				Partition: func() func() { p.Blackhole(); return p.Heal },
				// Latency on every byte, both ways, until restore.
				Delay: func(d time.Duration) func() { p.Delay(d); return func() { p.Delay(0) } },
				// IsolateServer stays nil: one server has no peers to be cut off from.
			}
		},
		// The defaults (100ms MinTTL, 250ms Grace, 2s OpTimeout) hold for lockd. A
		// restart keeps the table, so RestartLosesLocks stays false.
		Caps: conformance.Capabilities{MaxKeyLen: lockdlock.MaxKeyLen},
		Faults: conformance.Faults{
			PauseServer:   func(t *testing.T) func() { srv.Pause(); return srv.Resume },
			RestartServer: func(t *testing.T) { require.NoError(t, srv.Restart()) },
			// ChangeLeader and LoseMinority stay nil: there is no cluster.
		},
	}
}

// startServer starts a lockd server on a free loopback port, closed when t ends.
func startServer(t testing.TB) *lockd.Server {
	t.Helper()
	srv, err := lockd.Listen("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// newProxy starts a fault proxy in front of addr, closed when t ends.
func newProxy(t testing.TB, addr string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(addr, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// BenchmarkConformance measures lockdlock with the workloads every backend of the
// project is compared on (uncontended, parallel, handoff), through the proxies.
func BenchmarkConformance(b *testing.B) {
	srv := startServer(b)
	conformance.RunBenchmarks(b, harness(srv))
}
