package memlock_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/memlock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Harness returns the conformance harness for one shared memlock table: every client
// is the same *Locker, as every client of one server shares its state.
func harness() conformance.Harness {
	shared := memlock.New()
	return conformance.Harness{
		NewClient: func(t *testing.T) conformance.Client {
			// A crashed in-process client just stops calling; its leases lapse by ttl.
			return conformance.Client{Locker: shared, Crash: func() {}}
		},
		Caps: conformance.Capabilities{MaxKeyLen: memlock.MaxKeyLen},
	}
}

func TestConformance(t *testing.T) { conformance.Run(t, harness()) }
