package memlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
		NewClient: func(t testing.TB) conformance.Client {
			// A crashed in-process client just stops calling; its leases lapse by ttl.
			return conformance.Client{Locker: shared, Crash: func() {}}
		},
		Caps: conformance.Capabilities{MaxKeyLen: memlock.MaxKeyLen},
	}
}

func TestConformance(t *testing.T) { conformance.Run(t, harness()) }

func TestClose(t *testing.T) {
	l := memlock.New()
	held, err := l.TryLock(t.Context(), "held", time.Minute)
	require.NoError(t, err)
	woke := make(chan error, 1)
	go func() { woke <- l.Wait(context.Background(), "held") }()
	require.NoError(t, l.Close())
	require.NoError(t, l.Close(), "a second Close")
	require.ErrorIs(t, <-woke, distlock.ErrClosed, "Close must wake a Wait")
	_, err = l.TryLock(t.Context(), "k", time.Minute)
	require.ErrorIs(t, err, distlock.ErrClosed)
	_, err = l.Renew(t.Context(), held, time.Minute)
	require.ErrorIs(t, err, distlock.ErrClosed)
	require.ErrorIs(t, l.Unlock(t.Context(), held), distlock.ErrClosed)
	_, err = l.Inspect(t.Context(), "held")
	require.ErrorIs(t, err, distlock.ErrClosed)
	var oe *distlock.OpError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, distlock.OpError{Backend: "memlock", Op: "Inspect", Key: "held", Err: distlock.ErrClosed}, *oe)
}

func BenchmarkConformance(b *testing.B) { conformance.RunBenchmarks(b, harness()) }
