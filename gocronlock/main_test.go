package gocronlock_test

import (
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/backendtest"
	"github.com/distlock/distlock/internal/testenv"
)

// backends are every backend's, on servers that TestMain starts.
var backends []backendtest.Backend

func TestMain(m *testing.M) {
	testenv.Main(m, func(env *testenv.Env) error {
		var err error
		backends, err = backendtest.Start(env, "gocron")
		return err
	})
}

// skewedClock is a real clock that reads late by behind: a scheduler on it fires
// every tick behind later than one on a true clock, as on a machine whose clock is
// behind.
type skewedClock struct {
	clockwork.Clock
	behind time.Duration
}

func (c skewedClock) Now() time.Time                  { return c.Clock.Now().Add(-c.behind) }
func (c skewedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c skewedClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// newScheduler returns a started gocron scheduler with opts on a clock behind by
// behind, shut down when t ends.
func newScheduler(t *testing.T, behind time.Duration, opts ...gocron.SchedulerOption) gocron.Scheduler {
	t.Helper()
	opts = append(opts, gocron.WithClock(skewedClock{clockwork.NewRealClock(), behind}), gocron.WithStopTimeout(5*time.Second))
	s, err := gocron.NewScheduler(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Shutdown()) })
	return s
}

// testKey returns a job name of the test's own, fresh on every run.
func testKey(t *testing.T) string { return "gocron/" + t.Name() + "/" + driver.NewToken()[:8] }
