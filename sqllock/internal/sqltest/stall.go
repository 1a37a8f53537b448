package sqltest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// RenewStallBound is how long after its deadline a Renew may return in
// RenewDeadlinesWhileStalled. Past its deadline a call only has to wake on its
// context's timer and return; 100ms covers the scheduler of a loaded 2-core machine
// under -race, and is less than a tenth of what a Renew that waits for the latest
// deadline of its batch overshoots here (1.12s).
const RenewStallBound = 100 * time.Millisecond

// RenewDeadlinesWhileStalled tests that many leases with different deadlines
// renewed at once through l while its link to the database stalls (stall; heal
// ends it) each return by their own deadline (plus RenewStallBound) with an error
// that is not ErrNotHeld, whether a Renew runs alone, leads a batch, is in one or
// is queued; and that the leases renew again once the link is healed.
func RenewDeadlinesWhileStalled(t *testing.T, l Locker, stall, heal func()) {
	const n = 30
	deadline := func(i int) time.Duration { return 300*time.Millisecond + time.Duration(i)*40*time.Millisecond }
	leases := make([]distlock.Lease, n)
	for i := range leases {
		var err error
		leases[i], err = l.TryLock(OpCtx(t), Key(fmt.Sprintf("stall-%d", i)), time.Minute)
		require.NoError(t, err)
	}
	stall()
	healed := false
	defer func() {
		if !healed {
			heal()
		}
	}()
	// The Renews start in the order of their deadlines, a millisecond apart, so
	// that they queue in that order: the first Renew of each batch, the one that
	// led it, has the earliest deadline of its batch.
	var wg sync.WaitGroup
	took := make([]time.Duration, n)
	t0 := time.Now()
	for i := range leases {
		wg.Go(func() {
			ctx, cancel := context.WithDeadline(t.Context(), t0.Add(deadline(i)))
			defer cancel()
			_, err := l.Renew(ctx, leases[i], time.Minute)
			took[i] = time.Since(t0)
			if assert.Error(t, err, "Renew %d while the link stalls", i) {
				assert.NotErrorIs(t, err, distlock.ErrNotHeld, "Renew %d while the link stalls", i)
			}
		})
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	var worst time.Duration
	for i, d := range took {
		assert.LessOrEqual(t, d, deadline(i)+RenewStallBound, "Renew %d, whose deadline was %v, returned after %v", i, deadline(i), d)
		worst = max(worst, d-deadline(i))
	}
	t.Logf("the latest return came %v after its deadline", worst)
	heal()
	healed = true
	for i := range leases {
		_, err := l.Renew(OpCtx(t), leases[i], time.Minute)
		require.NoError(t, err, "Renew %d after the link healed", i)
	}
}
