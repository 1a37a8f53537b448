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

// proxied returns l as a conformance client whose Crash, Partition and Delay act on
// its own connection pool and fault proxy.
func proxied(t *testing.T, l distlock.Locker) conformance.Client {
	c := clientOf(t, l)
	return conformance.Client{
		Locker: l,
		Crash:  c.crash,
		Partition: func() func() {
			c.proxy.Blackhole()
			return c.proxy.Heal
		},
		Delay: func(d time.Duration) func() {
			c.proxy.Delay(d)
			return func() { c.proxy.Delay(0) }
		},
	}
}

// serverFaults are the faults of the server srv. An External server (given by an
// environment variable) cannot be paused or restarted: those tests are then
// reported as not run.
func serverFaults(srv interface {
	Pause(testing.TB)
	Resume(testing.TB)
	Restart(testing.TB)
	External() bool
}) conformance.Faults {
	if srv.External() {
		return conformance.Faults{}
	}
	return conformance.Faults{
		PauseServer: func(t *testing.T) func() {
			srv.Pause(t)
			return func() { srv.Resume(t) }
		},
		RestartServer: func(t *testing.T) { srv.Restart(t) },
	}
}

func TestConformancePostgres(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		NewClient: func(t *testing.T) conformance.Client {
			return proxied(t, newPG(t, &Options{Table: "conformance"}))
		},
		Caps:   conformance.Capabilities{MaxKeyLen: MaxKeyLen},
		Faults: serverFaults(pgSrv),
	})
}

func TestConformanceMariaDB(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		NewClient: func(t *testing.T) conformance.Client {
			return proxied(t, newMy(t, &Options{Table: "conformance"}))
		},
		Caps:   conformance.Capabilities{MaxKeyLen: MaxKeyLen},
		Faults: serverFaults(mySrv),
	})
}

func TestConformanceSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	conformance.Run(t, conformance.Harness{
		// SQLite has no server to partition, delay, pause or restart; Crash closes
		// the client's database handle.
		NewClient: func(t *testing.T) conformance.Client {
			l := newLite(t, path, &Options{Table: "conformance"})
			return conformance.Client{Locker: l, Crash: clientOf(t, l).crash}
		},
		Caps: conformance.Capabilities{MaxKeyLen: MaxKeyLen},
	})
}
