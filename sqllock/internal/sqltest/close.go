package sqltest

import (
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/sqllock"
	"github.com/stretchr/testify/require"
)

// testClose: after Close every call returns an *OpError wrapping ErrClosed, a
// second Close returns nil, held leases stay held, and the database handle stays
// open.
func (e Env) testClose(t *testing.T) {
	newOn := e.Constructor(t)
	opts := &sqllock.Options{Table: "closing"}
	l, err := newOn(opts)
	require.NoError(t, err)
	other := e.New(t, opts)
	key := Key("close")
	lease, err := l.TryLock(OpCtx(t), key, time.Minute)
	require.NoError(t, err)

	require.NoError(t, l.Close())
	require.NoError(t, l.Close(), "second Close")
	ctx := OpCtx(t)
	_, err = l.TryLock(ctx, "k", time.Minute)
	requireOpError(t, err, e.Backend, "TryLock", "k", distlock.ErrClosed)
	_, err = l.Renew(ctx, lease, time.Minute)
	requireOpError(t, err, e.Backend, "Renew", key, distlock.ErrClosed)
	requireOpError(t, l.Unlock(ctx, lease), e.Backend, "Unlock", key, distlock.ErrClosed)
	_, err = l.Inspect(ctx, key)
	requireOpError(t, err, e.Backend, "Inspect", key, distlock.ErrClosed)
	_, err = l.Prune(ctx, time.Hour)
	requireOpError(t, err, e.Backend, "Prune", "", distlock.ErrClosed)
	if w, ok := l.(distlock.Waiter); ok {
		requireOpError(t, w.Wait(ctx, key), e.Backend, "Wait", key, distlock.ErrClosed)
	}

	// Close released nothing; the handle still works for a new Locker.
	h, err := other.Inspect(OpCtx(t), key)
	require.NoError(t, err)
	require.Equal(t, lease.Fence, h.Fence)
	again, err := newOn(opts)
	require.NoError(t, err, "a Locker on the handle of a closed Locker")
	t.Cleanup(func() { again.Close() })
	_, err = again.TryLock(OpCtx(t), key, time.Minute)
	require.ErrorIs(t, err, distlock.ErrLocked)
}

// testErrors: every failure is an *OpError of the backend, the method and the key,
// wrapping the cause; bad options are New's error; a long key is shortened in the
// message.
func (e Env) testErrors(t *testing.T) {
	l := e.New(t, &sqllock.Options{Table: "errors"})
	ctx := OpCtx(t)
	_, err := l.TryLock(ctx, "", time.Minute)
	requireOpError(t, err, e.Backend, "TryLock", "", distlock.ErrInvalid)
	_, err = l.TryLock(ctx, "k", 0)
	requireOpError(t, err, e.Backend, "TryLock", "k", distlock.ErrInvalid)
	_, err = l.Renew(ctx, distlock.Lease{}, time.Minute)
	requireOpError(t, err, e.Backend, "Renew", "", distlock.ErrInvalid)
	requireOpError(t, l.Unlock(ctx, distlock.Lease{Key: "k"}), e.Backend, "Unlock", "k", distlock.ErrInvalid)
	_, err = l.Inspect(ctx, "")
	requireOpError(t, err, e.Backend, "Inspect", "", distlock.ErrInvalid)
	_, err = l.Prune(ctx, -time.Second)
	requireOpError(t, err, e.Backend, "Prune", "", distlock.ErrInvalid)

	long := strings.Repeat("k", 100_000) + driver.NewToken()
	lease, err := l.TryLock(ctx, long, time.Minute)
	require.NoError(t, err)
	_, err = l.TryLock(ctx, long, time.Minute)
	requireOpError(t, err, e.Backend, "TryLock", long, distlock.ErrLocked)
	require.NoError(t, l.Unlock(ctx, lease))
	requireOpError(t, l.Unlock(ctx, lease), e.Backend, "Unlock", long, distlock.ErrNotHeld)
	_, err = l.Renew(ctx, lease, time.Minute)
	requireOpError(t, err, e.Backend, "Renew", long, distlock.ErrNotHeld)
	_, err = l.Inspect(ctx, long)
	requireOpError(t, err, e.Backend, "Inspect", long, distlock.ErrNotHeld)

	for _, o := range []sqllock.Options{
		{CleanupTimeout: -time.Second},
		{EndSessionTimeout: -time.Second},
		{Owner: strings.Repeat("o", sqllock.MaxOwnerLen+1)},
		{Table: "a.b.c"},
	} {
		_, err := e.Constructor(t)(&o)
		requireOpError(t, err, e.Backend, "New", "", distlock.ErrInvalid)
	}
}
