package etcdlock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/etcdlock"
	"github.com/stretchr/testify/require"
)

// TestOpErrors: every method's error is an *OpError of etcdlock, the method and
// the key, wrapping the cause, and its message does not hold a long key in full.
func TestOpErrors(t *testing.T) {
	a := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), nil)
	b := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), nil)
	key := driver.NewToken() + strings.Repeat("k", etcdlock.MaxKeyLen-30)
	const ttl = 10 * time.Second
	ctx := ctxFor(t, 10*time.Second)
	done, cancel := context.WithCancel(ctx)
	cancel()

	la, err := a.TryLock(ctx, key, ttl)
	require.NoError(t, err)
	_, err = b.TryLock(ctx, key, ttl)
	requireOpError(t, err, "TryLock", key, distlock.ErrLocked)
	err = b.Wait(done, key)
	requireOpError(t, err, "Wait", key, distlock.ErrLocked)
	require.ErrorIs(t, err, context.Canceled)
	_, err = b.TryLock(done, key, ttl)
	requireOpError(t, err, "TryLock", key, context.Canceled)
	require.NotErrorIs(t, err, distlock.ErrLocked)
	require.NoError(t, a.Unlock(ctx, la))

	_, err = a.Renew(ctx, la, ttl)
	requireOpError(t, err, "Renew", key, distlock.ErrNotHeld)
	requireOpError(t, a.Unlock(ctx, la), "Unlock", key, distlock.ErrNotHeld)
	_, err = a.Inspect(ctx, key)
	requireOpError(t, err, "Inspect", key, distlock.ErrNotHeld)

	long := key + strings.Repeat("x", 30)
	_, err = a.TryLock(ctx, long, ttl)
	requireOpError(t, err, "TryLock", long, distlock.ErrInvalid)
	require.Contains(t, err.Error(), fmt.Sprintf("key of %d bytes", len(long)))
	_, err = a.TryLock(ctx, "k", 0)
	requireOpError(t, err, "TryLock", "k", distlock.ErrInvalid)
	_, err = a.Renew(ctx, distlock.Lease{}, ttl)
	requireOpError(t, err, "Renew", "", distlock.ErrInvalid)
	forged := distlock.Lease{Key: "k", Token: "forged", Fence: 1}
	requireOpError(t, a.Unlock(ctx, forged), "Unlock", "k", distlock.ErrInvalid)
	requireOpError(t, a.Wait(ctx, ""), "Wait", "", distlock.ErrInvalid)
	_, err = a.Inspect(ctx, long)
	requireOpError(t, err, "Inspect", long, distlock.ErrInvalid)
}
