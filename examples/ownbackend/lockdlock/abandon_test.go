package lockdlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/examples/ownbackend/lockdlock"
	"github.com/distlock/distlock/faultproxy"
)

// TestAbandonedLockArrivesAfterCleanup: a TryLock whose request is held up on its
// connection past the caller's deadline, and reaches the server only after the
// client's clean-up did, must not lock the key. (The suite's AbandonedAttempt covers
// the other order: the request first, then the clean-up.)
func TestAbandonedLockArrivesAfterCleanup(t *testing.T) {
	srv := startServer(t)
	hp, err := faultproxy.NewHoldProxy(srv.Addr(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = hp.Close() })
	late, err := lockdlock.New(hp.Addr(), nil)
	require.NoError(t, err)
	other, err := lockdlock.New(srv.Addr(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })

	hold := hp.HoldNext()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	_, err = late.TryLock(ctx, "k", time.Minute)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	<-hold.Held()
	// The clean-up's CANCEL went on a connection of its own, which the proxy did not
	// hold; Close returns once the server confirmed it.
	require.NoError(t, late.Close())
	hold.Release()
	select { // the server has read the LOCK and answered it
	case <-hold.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the held LOCK did not reach the server within 5s of its release")
	}
	lease, err := other.TryLock(t.Context(), "k", time.Minute)
	require.NoError(t, err, "a LOCK that arrived after its clean-up locked the key")
	require.NoError(t, other.Unlock(t.Context(), lease))
}
