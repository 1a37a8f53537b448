package sqltest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// StallBound is how long after its deadline a call may return in
// DeadlinesWhileStalled. Past its deadline a call only has to wake on its
// context's timer and return: at a load of 6 on 2 cores under -race, 449 of 450
// calls returned within 35ms of their deadlines and one 106ms after. 250ms keeps
// this test quiet on such a machine and is still far below what a call that waits
// for another's deadline or statement overshot here (1.12s with PostgreSQL and
// MySQL, 9.8s with SQLite's busy timeout of 10s).
const StallBound = 250 * time.Millisecond

// stallCalls is the number of calls made at once in DeadlinesWhileStalled.
const stallCalls = 30

// DeadlinesWhileStalled tests that many calls of one kind (Renew, TryLock, Unlock)
// with different deadlines made at once through l while its link to the database
// stalls (stall; heal ends it) each return by their own deadline (plus StallBound)
// with an error other than the contract's answers (ErrNotHeld, ErrLocked), whether
// a call runs alone, leads a batch, is in one or is queued; and that the keys work
// again once the link is healed.
func DeadlinesWhileStalled(t *testing.T, l Locker, stall, heal func()) {
	hold := func(t *testing.T, name string) []distlock.Lease {
		leases := make([]distlock.Lease, stallCalls)
		for i := range leases {
			var err error
			leases[i], err = l.TryLock(OpCtx(t), Key(fmt.Sprintf("%s-%d", name, i)), time.Minute)
			require.NoError(t, err)
		}
		return leases
	}
	t.Run("Renew", func(t *testing.T) {
		leases := hold(t, "stall-renew")
		callsWhileStalled(t, stall, heal, func(ctx context.Context, i int) error {
			_, err := l.Renew(ctx, leases[i], time.Minute)
			return err
		})
		for i := range leases {
			_, err := l.Renew(OpCtx(t), leases[i], time.Minute)
			require.NoError(t, err, "Renew %d after the link healed", i)
		}
	})
	t.Run("Unlock", func(t *testing.T) {
		leases := hold(t, "stall-unlock")
		callsWhileStalled(t, stall, heal, func(ctx context.Context, i int) error {
			return l.Unlock(ctx, leases[i])
		})
		for i := range leases { // the stalled statement may have run after the heal
			err := l.Unlock(OpCtx(t), leases[i])
			require.True(t, err == nil || errors.Is(err, distlock.ErrNotHeld), "Unlock %d after the link healed: %v", i, err)
		}
	})
	t.Run("TryLock", func(t *testing.T) {
		keys := make([]string, stallCalls)
		for i := range keys {
			keys[i] = Key(fmt.Sprintf("stall-trylock-%d", i))
		}
		callsWhileStalled(t, stall, heal, func(ctx context.Context, i int) error {
			_, err := l.TryLock(ctx, keys[i], time.Minute)
			return err
		})
		for i, key := range keys { // the cleanups release what the stalled statements took
			require.Eventually(t, func() bool {
				lease, err := l.TryLock(OpCtx(t), key, time.Minute)
				return err == nil && l.Unlock(OpCtx(t), lease) == nil
			}, 20*time.Second, 20*time.Millisecond, "TryLock %d after the link healed", i)
		}
	})
}

// callsWhileStalled makes stallCalls calls at once while the link stalls, call i
// with a deadline of 300ms + i*40ms, and checks that each returns by it.
func callsWhileStalled(t *testing.T, stall, heal func(), call func(ctx context.Context, i int) error) {
	deadline := func(i int) time.Duration { return 300*time.Millisecond + time.Duration(i)*40*time.Millisecond }
	stall()
	defer heal()
	// The calls start in the order of their deadlines, a millisecond apart, so
	// that they queue in that order: the first call of each batch, the one that
	// led it, has the earliest deadline of its batch.
	var wg sync.WaitGroup
	took := make([]time.Duration, stallCalls)
	t0 := time.Now()
	for i := range stallCalls {
		wg.Go(func() {
			ctx, cancel := context.WithDeadline(t.Context(), t0.Add(deadline(i)))
			defer cancel()
			err := call(ctx, i)
			took[i] = time.Since(t0)
			if assert.Error(t, err, "call %d while the link stalls", i) {
				assert.False(t, errors.Is(err, distlock.ErrNotHeld) || errors.Is(err, distlock.ErrLocked),
					"call %d while the link stalls: %v", i, err)
			}
		})
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	var worst time.Duration
	for i, d := range took {
		assert.LessOrEqual(t, d, deadline(i)+StallBound, "call %d, whose deadline was %v, returned after %v", i, deadline(i), d)
		worst = max(worst, d-deadline(i))
	}
	t.Logf("the latest return came %v after its deadline", worst)
}
