package sqllock

import (
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/conformance"
)

func splitHostPort(t testing.TB, addr string) (string, uint16) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		t.Fatal(err)
	}
	return host, uint16(n)
}

// proxyFaults are the faults of a backend whose clients each talk to the server
// through their own proxy, and whose server is srv. An External server (given by an
// environment variable) cannot be paused or restarted: those tests are then
// reported as not run.
func proxyFaults(srv interface {
	Pause(testing.TB)
	Resume(testing.TB)
	Restart(testing.TB)
	External() bool
}) conformance.Faults {
	f := conformance.Faults{
		Crash: func(t *testing.T, l distlock.Locker) { clientOf(t, l).crash() },
		Partition: func(t *testing.T, l distlock.Locker) func() {
			p := clientOf(t, l).proxy
			p.Blackhole()
			return p.Heal
		},
		Delay: func(t *testing.T, l distlock.Locker, d time.Duration) func() {
			p := clientOf(t, l).proxy
			p.Delay(d)
			return func() { p.Delay(0) }
		},
		PauseServer: func(t *testing.T) func() {
			srv.Pause(t)
			return func() { srv.Resume(t) }
		},
		RestartServer: func(t *testing.T) { srv.Restart(t) },
	}
	if srv.External() {
		f.PauseServer, f.RestartServer = nil, nil
	}
	return f
}

func TestConformancePostgres(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		NewClient: func(t *testing.T) distlock.Locker {
			return newPG(t, &Options{Table: "conformance"})
		},
		Caps: conformance.Capabilities{
			MaxKeyLen: MaxKeyLen,
			Waiter:    true,
			Inspector: true,
		},
		Faults: proxyFaults(pgSrv),
	})
}

func TestConformanceMariaDB(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		NewClient: func(t *testing.T) distlock.Locker {
			return newMy(t, &Options{Table: "conformance"})
		},
		Caps: conformance.Capabilities{
			MaxKeyLen: MaxKeyLen,
			Inspector: true,
		},
		Faults: proxyFaults(mySrv),
	})
}

func TestConformanceSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	conformance.Run(t, conformance.Harness{
		NewClient: func(t *testing.T) distlock.Locker {
			return newLite(t, path, &Options{Table: "conformance"})
		},
		Caps: conformance.Capabilities{
			MaxKeyLen: MaxKeyLen,
			Inspector: true,
		},
		// SQLite has no server to partition, delay, pause or restart; Crash closes
		// the client's database handle.
		Faults: conformance.Faults{
			Crash: func(t *testing.T, l distlock.Locker) { clientOf(t, l).crash() },
		},
	})
}
