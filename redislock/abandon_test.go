package redislock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/faultproxy"
)

// TestAbandonedAcquire (issue 28, item 6b): a TryLock's script is held up on its
// connection past the caller's deadline; the Locker's cleanups run on another
// connection (one when the caller gives up, one when the command fails on its read
// timeout) and find nothing to remove; then the held script reaches the server.
// It must not lock the key under a token that no one holds (contract rule 5: a
// request still in flight cannot lock the key after the cleanup).
func TestAbandonedAcquire(t *testing.T) {
	hp, err := faultproxy.NewHoldProxy(redisSrv.Addr(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = hp.Close() })
	// The held command fails on its read timeout, and then its connection closes.
	c := redis.NewClient(&redis.Options{Addr: hp.Addr(), ReadTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	a := newLockerOn(t, c, nil)
	b := newLocker(t, nil)
	key := testKey(t)

	// Warm up a connection and the script cache, so that the held bytes are the
	// acquire's EVALSHA.
	lease, err := a.TryLock(ctxT(t), key, time.Minute)
	require.NoError(t, err)
	require.NoError(t, a.Unlock(ctxT(t), lease))

	h := hp.HoldNext()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	_, err = a.TryLock(ctx, key, time.Minute)
	cancel()
	require.Error(t, err, "TryLock whose script is held")
	require.NotErrorIs(t, err, distlock.ErrLocked)
	select {
	case <-h.Held():
	default:
		t.Fatal("the proxy held nothing: TryLock sent no script")
	}
	require.NoError(t, a.Close()) // waits for the abandoned command and the cleanups

	h.Release()
	select {
	case <-h.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the held connection did not end within 10s of Release")
	}
	// The server has run everything the held connection sent: the key must be free.
	lb, err := b.TryLock(ctxT(t), key, time.Minute)
	if err != nil {
		hd, ierr := b.Inspect(ctxT(t), key)
		t.Fatalf("TryLock after the abandoned script arrived: %v (holder %+v, %v): the late script locked the key", err, hd, ierr)
	}
	require.NoError(t, b.Unlock(ctxT(t), lb))
}
