package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/memlock"
)

// Context() made after the Held stopped is already cancelled, with the cause it
// would have had: the loss, the release, or Hold's ctx's own error and cause.
func TestHoldContextAfterItStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ml := memlock.New()
		acquire := func(key string) distlock.Lease {
			lease, err := ml.TryLock(t.Context(), key, time.Minute)
			require.NoError(t, err)
			return lease
		}

		lost := acquire("lost")
		h := distlock.Hold(t.Context(), ml, lost, nil)
		require.NoError(t, ml.Unlock(t.Context(), lost)) // memlock reports the loss
		synctest.Wait()
		require.ErrorIs(t, h.Err(), distlock.ErrNotHeld)
		require.ErrorIs(t, context.Cause(h.Context()), distlock.ErrNotHeld, "Context() made after the loss")
		require.ErrorIs(t, h.Context().Err(), context.Canceled)

		released := distlock.Hold(t.Context(), ml, acquire("released"), nil)
		require.NoError(t, released.Release(t.Context()))
		require.ErrorIs(t, released.Context().Err(), context.Canceled, "Context() made after Release")
		require.NotErrorIs(t, context.Cause(released.Context()), distlock.ErrNotHeld)

		cause := errors.New("shutting down")
		ctx, cancel := context.WithCancelCause(t.Context())
		ended := distlock.Hold(ctx, ml, acquire("ended"), nil)
		cancel(cause)
		synctest.Wait()
		require.ErrorIs(t, context.Cause(ended.Context()), cause, "Context() made after Hold's ctx ended")
		require.NoError(t, ended.Release(t.Context()))

		dctx, dcancel := context.WithTimeout(t.Context(), time.Second)
		defer dcancel()
		timedOut := distlock.Hold(dctx, ml, acquire("deadline"), nil)
		time.Sleep(2 * time.Second)
		require.ErrorIs(t, timedOut.Context().Err(), context.DeadlineExceeded)
		require.NoError(t, timedOut.Release(t.Context()))

		// Made before: cancelled at the loss.
		early := distlock.Hold(t.Context(), ml, acquire("early"), nil)
		hctx := early.Context()
		require.NoError(t, hctx.Err())
		require.NoError(t, ml.Unlock(t.Context(), early.Lease()))
		synctest.Wait()
		require.ErrorIs(t, context.Cause(hctx), distlock.ErrNotHeld)
	})
}

// A Held that nobody asks for its Context() costs no context of its own: many
// leases can be held in little memory (the matrix's W5 holds 10,000 in one
// process). The bound is generous; a context per Held (a cancelCtx, its Done
// channel, its children map and an AfterFunc on it) took it over 1,200 bytes.
func TestHoldMemoryPerLease(t *testing.T) {
	ml := memlock.New()
	const n = 5000
	leases := make([]distlock.Lease, n)
	for i := range leases {
		var err error
		leases[i], err = ml.TryLock(t.Context(), fmt.Sprint("k", i), time.Minute)
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	held := make([]*distlock.Held, n)
	before := liveHeap()
	for i := range held {
		held[i] = distlock.Hold(ctx, ml, leases[i], nil)
	}
	perLease := (liveHeap() - before) / n
	for _, h := range held {
		require.NoError(t, h.Release(t.Context()))
	}
	t.Logf("%d bytes per held lease (memlock's own share included)", perLease)
	require.Less(t, perLease, int64(900), "live heap per held lease")
}

func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
