package mysql

import (
	"testing"

	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
)

func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		NewClient: func(t testing.TB) conformance.Client {
			_, _, c := newClient(t, &sqllock.Options{Table: "conformance"})
			return c
		},
		Caps:   conformance.Capabilities{MaxKeyLen: sqllock.MaxKeyLen},
		Faults: sqltest.ServerFaults(mySrv),
	})
}
