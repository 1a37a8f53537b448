package gocronlock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/gocronlock"
	"github.com/distlock/distlock/internal/locktest"
	"github.com/distlock/distlock/memlock"
)

// TestRunEndsByExpiresWhateverRenewDoes: a run's Context ends at its lease's
// Expires while a renewal that ignores its ctx is stuck, so that the job stops
// before another instance can start it, and Unlock reports the loss.
func TestRunEndsByExpiresWhateverRenewDoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := locktest.NewDeafRenew(memlock.New())
		defer close(d.Release)
		lk, err := gocronlock.NewLocker(d, &gocronlock.Options{TTL: 3 * time.Second})
		require.NoError(t, err)
		l, err := lk.Lock(t.Context(), "job")
		require.NoError(t, err)
		lease, ok := lk.Lease("job")
		require.True(t, ok)
		ctx := lk.Context(t.Context(), "job")
		<-d.Entered
		<-ctx.Done()
		require.Zero(t, time.Since(lease.Expires), "the run's Context did not end at its lease's Expires")
		require.ErrorIs(t, context.Cause(ctx), distlock.ErrNotHeld)
		uctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, l.Unlock(uctx), distlock.ErrNotHeld)
		require.NoError(t, lk.Close())
	})
}
