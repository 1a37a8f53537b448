package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/driver"
)

// TestUnlockFinishesAfterCancel (issue 28, item 6): Unlock returns once a quorum
// released the lease; the releases on the other nodes run on. A caller that cancels
// its context right after Unlock must not drop them, or those nodes stay locked
// until the ttl (30s here).
func TestUnlockFinishesAfterCancel(t *testing.T) {
	l := newLocker(t, nil)
	key := "unlock-cancel-" + driver.NewToken()[:8]
	lease, err := l.TryLock(t.Context(), key, 30*time.Second)
	require.NoError(t, err)
	held := func(i int) bool {
		ok, err := rawExists(t.Context(), i, lockName(key))
		require.NoError(t, err)
		return ok
	}
	require.Eventually(t, func() bool { return held(3) && held(4) }, 5*time.Second, 10*time.Millisecond, "nodes 3 and 4 hold the lease")
	release := l.HoldRelease(3, 4)
	t.Cleanup(release)
	ctx, cancel := context.WithCancel(t.Context())
	require.NoError(t, l.Unlock(ctx, lease)) // nodes 0, 1 and 2 released it
	cancel()
	release()
	require.Eventually(t, func() bool { return !held(3) && !held(4) }, 5*time.Second, 10*time.Millisecond,
		"nodes 3 and 4 still hold the lock after Unlock: their releases ended with the caller's context")
}
