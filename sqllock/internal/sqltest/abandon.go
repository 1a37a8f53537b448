package sqltest

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/faultproxy"
	"github.com/stretchr/testify/require"
)

// AbandonedAcquire tests that an acquire statement that is held up on its
// connection past the caller's deadline, and reaches the database only after
// TryLock returned, the driver closed the connection and the Locker's cleanup
// ended, does not lock the key (contract rule 5): the Locker ends the statement's
// database session before its cleanup, so the late bytes are never executed.
// server is the database's address; newLocker returns a Locker on the table
// "abandon" that reaches the database at addr ("" for directly).
func AbandonedAcquire(t *testing.T, server string, newLocker func(t *testing.T, addr string) Locker) {
	hp, err := faultproxy.NewHoldProxy(server, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = hp.Close() })
	a := newLocker(t, hp.Addr())
	b := newLocker(t, "")
	key := Key("abandon")

	// Warm up the connection (prepared statements, session identity), so that the
	// held bytes are the acquiring statement itself.
	lease, err := a.TryLock(OpCtx(t), key, time.Minute)
	require.NoError(t, err, "warm-up TryLock")
	require.NoError(t, a.Unlock(OpCtx(t), lease), "warm-up Unlock")

	h := hp.HoldNext()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	_, err = a.TryLock(ctx, key, time.Minute)
	cancel()
	require.Error(t, err, "TryLock whose statement is held")
	require.NotErrorIs(t, err, distlock.ErrLocked, "TryLock whose statement is held: want a transport error")
	select {
	case <-h.Held():
	default:
		t.Fatal("the proxy held nothing: TryLock sent no statement")
	}
	require.NoError(t, a.Close()) // waits for the cleanup (bounded by its timeouts)

	h.Release()
	select {
	case <-h.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the held connection did not end within 10s of Release")
	}
	// The database has read everything the connection sent (or discarded it with
	// the session): the key must be free.
	lb, err := b.TryLock(OpCtx(t), key, time.Minute)
	if err != nil {
		hd, ierr := b.Inspect(OpCtx(t), key)
		t.Fatalf("TryLock after the abandoned statement arrived: %v (holder %+v, %v); the late statement locked the key", err, hd, ierr)
	}
	require.NoError(t, b.Unlock(OpCtx(t), lb))
}
