package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/redlock"
)

// TestNoHerd: waiters on one key across 4 Lockers take it one after another, and a
// release costs each Locker with waiters about one attempt, not one per waiter.
func TestNoHerd(t *testing.T) {
	const lockers, perLocker = 4, 40
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := "herd-" + driver.NewToken()[:8]
	// Generous node timeouts: the machine may be loaded, and timeouts are not what
	// this test is about.
	opts := &redlock.Options{NodeTimeout: 2 * time.Second}
	holder := newLocker(t, opts)
	first, err := holder.TryLock(ctx, key, 30*time.Second)
	require.NoError(t, err)
	var ls []*redlock.Locker
	for range lockers {
		ls = append(ls, newLocker(t, opts))
	}
	per := herdRounds(ctx, t, holder, first, ls, perLocker, 0)
	t.Logf("%d handoffs, %.2f attempts per handoff", lockers*perLocker, per)
	// About one attempt per Locker with waiters and release (each woken loser waits
	// again, and may find the key free when its read comes after the next release),
	// plus split votes: bounded by the Lockers, not by the waiters (40 per Locker).
	require.LessOrEqual(t, per, float64(3*lockers))
}
