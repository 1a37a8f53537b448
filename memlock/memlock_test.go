package memlock_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/memlock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Harness returns the conformance harness for one shared memlock table: every client
// is the same *Locker, as every client of one server shares its state.
func harness() conformance.Harness {
	shared := memlock.New()
	return conformance.Harness{
		NewClient: func(t *testing.T) distlock.Locker { return shared },
		Caps:      conformance.Capabilities{MaxKeyLen: memlock.MaxKeyLen, Waiter: true, Inspector: true},
		Faults: conformance.Faults{
			// A crashed in-process client just stops calling; its leases lapse by ttl.
			Crash: func(t *testing.T, l distlock.Locker) {},
		},
	}
}

func TestConformance(t *testing.T) { conformance.Run(t, harness()) }
