package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/memlock"
)

// TestLeaseClock: renewals that began while the lease was held move its end; once
// the lease has ended, nothing moves it again and renewals are refused (so that
// Hold gives the lease up too); a loss that the backend reports ends it at once;
// the wrapped Locker keeps its LossNotifier, which Hold looks for.
func TestLeaseClock(t *testing.T) {
	ctx := context.Background()
	mem := memlock.New()
	lease, err := mem.TryLock(ctx, "k", time.Hour)
	require.NoError(t, err)
	clock := newLeaseClock(lease)
	l := clock.track(mem)
	_, ok := l.(distlock.LossNotifier)
	require.True(t, ok, "the tracked Locker lost its LossNotifier")

	next, err := l.Renew(ctx, lease, 2*time.Hour)
	require.NoError(t, err)
	end, over := clock.endedBy(time.Now())
	require.False(t, over)
	require.True(t, end.Equal(next.Expires), "a renewal did not move the end to %v: %v", next.Expires, end)

	// The lease ends (as it would after distlock slept past it): a renewal now
	// must not extend it, even though the server would.
	end, over = clock.endedBy(end)
	require.True(t, over)
	_, err = l.Renew(ctx, next, 3*time.Hour)
	require.ErrorIs(t, err, distlock.ErrNotHeld)
	require.True(t, clock.deadline().Equal(end), "the refused renewal moved the end")
	held, err := mem.Inspect(ctx, "k")
	require.NoError(t, err)
	// memlock holds the key until about next.Expires (its table counts from when
	// the renewal ran, a little after the Renew began); the refused renewal would
	// have moved that to 3 hours from now.
	require.WithinDuration(t, next.Expires, held.Expires, time.Minute, "the refused renewal reached the backend: it holds the key until %v, not %v", held.Expires, next.Expires)
}

// TestLeaseClockEarlyLoss: a Renew that says ErrNotHeld ends the lease when its
// answer came, before the Expires that it had.
func TestLeaseClockEarlyLoss(t *testing.T) {
	ctx := context.Background()
	mem := memlock.New()
	lease, err := mem.TryLock(ctx, "k", time.Hour)
	require.NoError(t, err)
	clock := newLeaseClock(lease)
	l := clock.track(mem)
	require.True(t, mem.Revoke("k"))
	before := time.Now()
	_, err = l.Renew(ctx, lease, time.Hour)
	after := time.Now()
	require.True(t, errors.Is(err, distlock.ErrNotHeld), "renew of a revoked lease: %v", err)
	end, early := clock.lostBy(time.Now())
	require.True(t, early, "the loss was not before the lease's Expires")
	require.False(t, end.Before(before), "the lease ended before the renewal began")
	require.False(t, end.After(after), "the lease ended after the renewal's answer")
}
