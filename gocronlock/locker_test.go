package gocronlock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/election"
	"github.com/distlock/distlock/gocronlock"
	"github.com/distlock/distlock/memlock"
)

// newLocker returns a Locker over l with opts, closed when t ends.
func newLocker(t *testing.T, l distlock.Locker, opts *gocronlock.Options) *gocronlock.Locker {
	t.Helper()
	lk, err := gocronlock.NewLocker(l, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, lk.Close()) })
	return lk
}

func TestNewLockerInvalid(t *testing.T) {
	_, err := gocronlock.NewLocker(nil, nil)
	require.ErrorIs(t, err, distlock.ErrInvalid)
	for _, o := range []gocronlock.Options{
		{TTL: -1}, {Every: -1}, {MinHold: -1}, {ReleaseTimeout: -1}, {TTL: time.Second, Every: time.Second},
	} {
		_, err := gocronlock.NewLocker(memlock.New(), &o)
		require.ErrorIs(t, err, distlock.ErrInvalid, "%+v", o)
	}
}

// TestMinHold: Unlock returns at once, but the key stays held until MinHold after
// it was acquired; then another scheduler gets it. It runs in a synctest bubble:
// virtual time, so a loaded machine cannot stretch a step past MinHold.
func TestMinHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memlock.New()
		const minHold = 300 * time.Millisecond
		a := newLocker(t, m, &gocronlock.Options{TTL: time.Minute, MinHold: minHold})
		b := newLocker(t, m, &gocronlock.Options{TTL: time.Minute, MinHold: minHold})
		acquired := time.Now()
		l, err := a.Lock(t.Context(), "job")
		require.NoError(t, err)
		_, err = b.Lock(t.Context(), "job")
		require.ErrorIs(t, err, distlock.ErrLocked)

		start := time.Now()
		require.NoError(t, l.Unlock(t.Context()))
		require.Zero(t, time.Since(start), "Unlock waited for MinHold")
		// The sleeps are the point: in the bubble they move virtual time to 1ms
		// before MinHold, then to MinHold, with no real wait.
		time.Sleep(minHold - time.Millisecond)
		synctest.Wait()
		_, err = b.Lock(t.Context(), "job")
		require.ErrorIs(t, err, distlock.ErrLocked, "the key was released before MinHold")

		time.Sleep(time.Millisecond)
		synctest.Wait()
		lb, err := b.Lock(t.Context(), "job")
		require.NoError(t, err, "the key is still held at MinHold")
		require.Equal(t, minHold, time.Since(acquired))
		require.NoError(t, lb.Unlock(t.Context()))
	})
}

// TestUnlockDeadContext: gocron may unlock with a context that has ended (its
// job's, at shutdown); the key is released all the same.
func TestUnlockDeadContext(t *testing.T) {
	m := memlock.New()
	lk := newLocker(t, m, &gocronlock.Options{TTL: time.Minute, MinHold: time.Nanosecond})
	ctx, cancel := context.WithCancel(t.Context())
	l, err := lk.Lock(ctx, "job")
	require.NoError(t, err)
	cancel()
	require.NoError(t, l.Unlock(ctx))
	_, err = m.Inspect(t.Context(), "job")
	require.ErrorIs(t, err, distlock.ErrNotHeld, "the key is still held after Unlock")
}

// TestRunContext: Context and Lease follow the run of a key: a Context for a key
// without a run is cancelled at once (ErrNotHeld); one taken during the run ends at
// Unlock; Lease gives the run's fence.
func TestRunContext(t *testing.T) {
	lk := newLocker(t, memlock.New(), &gocronlock.Options{TTL: time.Minute, MinHold: time.Nanosecond})
	ctx := lk.Context(t.Context(), "job")
	require.Error(t, ctx.Err())
	require.ErrorIs(t, context.Cause(ctx), distlock.ErrNotHeld)
	_, ok := lk.Lease("job")
	require.False(t, ok)

	l, err := lk.Lock(t.Context(), "job")
	require.NoError(t, err)
	ctx = lk.Context(t.Context(), "job")
	require.NoError(t, ctx.Err())
	lease, ok := lk.Lease("job")
	require.True(t, ok)
	require.NotZero(t, lease.Fence)
	require.NoError(t, l.Unlock(t.Context()))
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the run's Context outlived Unlock by 5s")
	}
	require.NotErrorIs(t, context.Cause(ctx), distlock.ErrNotHeld, "a run that ended normally reported as lost")
}

// TestLostRun: a lease taken away while the job runs ends the job's Context with
// ErrNotHeld, calls OnLost once, and makes Unlock report the loss.
func TestLostRun(t *testing.T) {
	m := memlock.New()
	lost := make(chan error, 2)
	lk := newLocker(t, m, &gocronlock.Options{TTL: time.Minute, MinHold: time.Minute,
		OnLost: func(key string, err error) {
			require.Equal(t, "job", key)
			lost <- err
		}})
	l, err := lk.Lock(t.Context(), "job")
	require.NoError(t, err)
	ctx := lk.Context(t.Context(), "job")
	require.True(t, m.Revoke("job"))
	<-ctx.Done()
	require.ErrorIs(t, context.Cause(ctx), distlock.ErrNotHeld)
	require.ErrorIs(t, l.Unlock(t.Context()), distlock.ErrNotHeld)
	require.ErrorIs(t, <-lost, distlock.ErrNotHeld)
	require.Empty(t, lost, "OnLost called twice")
}

// TestClose: Close ends a run whose job still runs (Context cause ErrClosed, key
// released at once), waits for the MinHold of a run that returned, and makes later
// Locks fail with ErrClosed.
func TestClose(t *testing.T) {
	m := memlock.New()
	const minHold = 300 * time.Millisecond
	lk, err := gocronlock.NewLocker(m, &gocronlock.Options{TTL: time.Minute, MinHold: minHold})
	require.NoError(t, err)
	running, err := lk.Lock(t.Context(), "running")
	require.NoError(t, err)
	runCtx := lk.Context(t.Context(), "running")
	done, err := lk.Lock(t.Context(), "done")
	require.NoError(t, err)
	acquired := time.Now()
	require.NoError(t, done.Unlock(t.Context()))

	closed := make(chan error, 1)
	go func() { closed <- lk.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5s: it waits for a run whose job still runs")
	}
	require.GreaterOrEqual(t, time.Since(acquired), minHold, "Close returned before the MinHold of a finished run")
	require.ErrorIs(t, context.Cause(runCtx), distlock.ErrClosed)
	for _, key := range []string{"running", "done"} {
		_, err := m.Inspect(t.Context(), key)
		require.ErrorIs(t, err, distlock.ErrNotHeld, "key %q still held after Close", key)
	}
	require.ErrorIs(t, running.Unlock(t.Context()), distlock.ErrClosed)
	_, err = lk.Lock(t.Context(), "other")
	require.ErrorIs(t, err, distlock.ErrClosed)
	require.NoError(t, lk.Close())
}

// TestElector: of two Electors, one leads; its Context lives and the other's is
// cancelled; when the leader closes, the other leads promptly.
func TestElector(t *testing.T) {
	m := memlock.New()
	opts := &election.Options{TTL: time.Minute}
	a, err := gocronlock.NewElector(m, "leader", opts)
	require.NoError(t, err)
	defer a.Close()
	require.Eventually(t, func() bool { return a.IsLeader(t.Context()) == nil }, 5*time.Second, time.Millisecond)
	b, err := gocronlock.NewElector(m, "leader", opts)
	require.NoError(t, err)
	defer b.Close()
	require.ErrorIs(t, b.IsLeader(t.Context()), gocronlock.ErrNotLeader)
	require.Nil(t, b.Leadership())
	require.ErrorIs(t, context.Cause(b.Context(t.Context())), gocronlock.ErrNotLeader)
	actx := a.Context(t.Context())
	require.NoError(t, actx.Err())
	term := a.Leadership().Term()

	require.NoError(t, a.Close())
	require.ErrorIs(t, context.Cause(actx), election.ErrResigned)
	require.ErrorIs(t, a.IsLeader(t.Context()), gocronlock.ErrNotLeader)
	require.Eventually(t, func() bool { return b.IsLeader(t.Context()) == nil }, 2*time.Second, time.Millisecond,
		"the other Elector did not lead within 2s of the leader's Close (ttl 1m)")
	require.Greater(t, b.Leadership().Term(), term)
}

// TestElectorLoss: an Elector whose lease is taken away stops leading at once, and
// campaigns again.
func TestElectorLoss(t *testing.T) {
	m := memlock.New()
	el, err := gocronlock.NewElector(m, "leader", &election.Options{TTL: time.Minute})
	require.NoError(t, err)
	defer el.Close()
	require.Eventually(t, func() bool { return el.IsLeader(t.Context()) == nil }, 5*time.Second, time.Millisecond)
	ctx := el.Context(t.Context())
	term := el.Leadership().Term()
	require.True(t, m.Revoke("leader"))
	<-ctx.Done()
	require.ErrorIs(t, context.Cause(ctx), distlock.ErrNotHeld)
	require.Eventually(t, func() bool {
		lead := el.Leadership()
		return lead != nil && lead.Term() > term && el.IsLeader(t.Context()) == nil
	}, 5*time.Second, time.Millisecond, "the Elector did not lead again")
	require.False(t, errors.Is(el.IsLeader(t.Context()), gocronlock.ErrNotLeader))
}
