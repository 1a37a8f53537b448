package distlock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/locktest"
	"github.com/distlock/distlock/memlock"
)

func TestDoRunsUnderTheLock(t *testing.T) {
	s := &spy{Locker: memlock.New()}
	ran := false
	err := distlock.Do(t.Context(), s, "job", nil, func(ctx context.Context) error {
		ran = true
		_, err := s.TryLock(ctx, "job", time.Second)
		require.ErrorIs(t, err, distlock.ErrLocked, "key not held inside Do")
		return nil
	})
	require.NoError(t, err)
	require.True(t, ran)
	require.Equal(t, distlock.DefaultTTL, s.Tries()[0].ttl, "nil DoOptions: TTL is DefaultTTL")
	_, err = s.TryLock(t.Context(), "job", time.Second)
	require.NoError(t, err, "key not released after Do")
}

func TestDoReturnsErrLockedWithoutRunning(t *testing.T) {
	l := memlock.New()
	_, err := l.TryLock(t.Context(), "job", time.Minute)
	require.NoError(t, err)
	err = distlock.Do(t.Context(), l, "job", nil, func(context.Context) error {
		t.Error("fn ran while the key was held elsewhere")
		return nil
	})
	require.ErrorIs(t, err, distlock.ErrLocked)
}

func TestDoRejectsBadOptions(t *testing.T) {
	for name, opts := range map[string]*distlock.DoOptions{
		"negative TTL":            {TTL: -time.Second},
		"negative MinHold":        {MinHold: -time.Second},
		"negative ReleaseTimeout": {ReleaseTimeout: -time.Second},
	} {
		s := &spy{Locker: memlock.New()}
		err := distlock.Do(t.Context(), s, "job", opts, func(context.Context) error {
			t.Errorf("%s: fn ran", name)
			return nil
		})
		require.ErrorIs(t, err, distlock.ErrInvalid, name)
		require.Empty(t, s.Tries(), name)
	}
}

func TestDoRenewsWhileFnRuns(t *testing.T) {
	for name, tc := range map[string]struct{ every, want time.Duration }{
		"default Every": {0, 100 * time.Millisecond},
		"Every":         {30 * time.Millisecond, 30 * time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &spy{Locker: memlock.New()}
				ttl := 300 * time.Millisecond
				err := distlock.Do(t.Context(), s, "job", &distlock.DoOptions{TTL: ttl, Every: tc.every}, func(ctx context.Context) error {
					time.Sleep(3*ttl + 5*time.Millisecond)
					_, err := s.TryLock(ctx, "job", ttl)
					require.ErrorIs(t, err, distlock.ErrLocked, "key not held after 3 ttls inside Do")
					return nil
				})
				require.NoError(t, err)
				renews := s.Renews()
				require.NotEmpty(t, renews)
				for n, d := range gaps(append(s.Tries()[:1], renews...)) {
					require.Equal(t, tc.want, d, "renewal %d", n)
					require.Equal(t, ttl, renews[n].ttl, "renewal %d", n)
				}
			})
		})
	}
}

func TestDoReportsLossWhileRunning(t *testing.T) {
	for name, wrap := range map[string]func(*memlock.Locker) distlock.Locker{
		"LossNotifier": func(m *memlock.Locker) distlock.Locker { return m },
		"Renew":        func(m *memlock.Locker) distlock.Locker { return plain{m} },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := memlock.New()
				errFn := errors.New("fn stopped")
				err := distlock.Do(t.Context(), wrap(m), "job", &distlock.DoOptions{TTL: time.Second}, func(ctx context.Context) error {
					m.Revoke("job")
					<-ctx.Done() // the held context dies with the lease
					return errFn
				})
				require.ErrorIs(t, err, distlock.ErrNotHeld, "the lease was lost while fn ran")
				require.ErrorIs(t, err, errFn)
			})
		})
	}
}

// Do's doc: fn's error is joined with ErrNotHeld "when the lease was lost before fn
// returned". A fn that returns right after the loss, before Hold has noticed it,
// gets nil: Do treats Unlock's ErrNotHeld as a loss after fn returned.
func TestDoReportsLossJustBeforeFnReturned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memlock.New()
		err := distlock.Do(t.Context(), plain{m}, "job", &distlock.DoOptions{TTL: time.Second}, func(ctx context.Context) error {
			m.Revoke("job") // a failover while fn runs; fn ends before the next renewal
			return nil
		})
		require.ErrorIs(t, err, distlock.ErrNotHeld, "the lease was lost before fn returned")
	})
}

func TestDoMinHoldKeepsTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memlock.New()
		minHold := 300 * time.Millisecond
		fnDone := make(chan struct{})
		doDone := make(chan error, 1)
		start := time.Now()
		go func() {
			doDone <- distlock.Do(t.Context(), l, "tick", &distlock.DoOptions{TTL: time.Second, MinHold: minHold}, func(context.Context) error {
				close(fnDone)
				return nil
			})
		}()
		<-fnDone
		synctest.Wait()
		_, err := l.TryLock(t.Context(), "tick", time.Second)
		require.ErrorIs(t, err, distlock.ErrLocked, "key free right after a short fn, within MinHold")
		require.NoError(t, <-doDone)
		require.Equal(t, minHold, time.Since(start), "Do must return at MinHold")
		_, err = l.TryLock(t.Context(), "tick", time.Second)
		require.NoError(t, err, "key still held after MinHold")
	})
}

// If ctx ends during MinHold, Do returns without unlocking and the lease lapses at
// its Expires.
func TestDoMinHoldWhenCtxEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &spy{Locker: memlock.New()}
		ttl := 300 * time.Millisecond
		ctx, cancel := context.WithCancel(t.Context())
		doDone := make(chan error, 1)
		go func() {
			doDone <- distlock.Do(ctx, s, "tick", &distlock.DoOptions{TTL: ttl, MinHold: time.Hour}, func(context.Context) error { return nil })
		}()
		time.Sleep(ttl - 50*time.Millisecond) // renewals at ttl/3 and 2ttl/3
		cancel()
		require.NoError(t, <-doDone)
		cancelled := time.Now()
		require.Zero(t, s.Unlocks(), "Do unlocked although ctx ended during MinHold")
		_, err := s.TryLock(t.Context(), "tick", ttl)
		require.ErrorIs(t, err, distlock.ErrLocked, "the lease must stay until its Expires")
		lastRenewal := s.Renews()[len(s.Renews())-1]
		time.Sleep(lastRenewal.at.Add(ttl).Sub(cancelled))
		_, err = s.TryLock(t.Context(), "tick", ttl)
		require.NoError(t, err, "the lease did not lapse at its Expires")
	})
}

// A lease lost during MinHold, after fn returned, is not fn's failure; Do returns
// at once.
func TestDoLossDuringMinHoldIsNotAnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memlock.New()
		doDone := make(chan error, 1)
		go func() {
			doDone <- distlock.Do(t.Context(), m, "tick", &distlock.DoOptions{TTL: time.Second, MinHold: time.Hour}, func(context.Context) error { return nil })
		}()
		time.Sleep(100 * time.Millisecond)
		m.Revoke("tick")
		revoked := time.Now()
		require.NoError(t, <-doDone)
		require.Zero(t, time.Since(revoked), "Do kept waiting for MinHold after the lease was lost")
	})
}

// stuckUnlock's Unlock never gets a reply: it returns when its ctx ends.
type stuckUnlock struct{ distlock.Locker }

func (stuckUnlock) Unlock(ctx context.Context, _ distlock.Lease) error {
	<-ctx.Done()
	return ctx.Err()
}

// The final Unlock runs even when ctx has ended, bounded by ReleaseTimeout.
func TestDoReleasesAfterCtxEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &spy{Locker: memlock.New()}
		ctx, cancel := context.WithCancel(t.Context())
		err := distlock.Do(ctx, s, "job", nil, func(context.Context) error {
			cancel()
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, 1, s.Unlocks())
		_, err = s.TryLock(t.Context(), "job", time.Minute)
		require.NoError(t, err, "key still held: Do did not unlock after ctx ended")

		start := time.Now()
		err = distlock.Do(t.Context(), stuckUnlock{memlock.New()}, "job", &distlock.DoOptions{ReleaseTimeout: 2 * time.Second}, func(context.Context) error { return nil })
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, 2*time.Second, time.Since(start), "ReleaseTimeout must bound the final Unlock")
	})
}

func TestDoJoinsTheReleaseError(t *testing.T) {
	s := &spy{Locker: memlock.New()}
	s.failUnlock.Store(true)
	errFn := errors.New("fn failed")
	err := distlock.Do(t.Context(), s, "job", nil, func(context.Context) error { return errFn })
	require.ErrorIs(t, err, errFn)
	require.ErrorIs(t, err, errTransport)
	require.NotErrorIs(t, err, distlock.ErrNotHeld)
}

func TestDoWaitIsCancellable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memlock.New()
		_, err := l.TryLock(t.Context(), "job", time.Hour)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- distlock.Do(ctx, l, "job", &distlock.DoOptions{Wait: true}, func(context.Context) error {
				t.Error("fn ran while the key was held elsewhere")
				return nil
			})
		}()
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Empty(t, done, "Do returned while the key was held")
		cancel()
		err = <-done
		require.ErrorIs(t, err, distlock.ErrLocked)
		require.ErrorIs(t, err, context.Canceled)
	})
}

func TestDoReleasesOnPanic(t *testing.T) {
	l := memlock.New()
	require.PanicsWithValue(t, "boom", func() {
		_ = distlock.Do(t.Context(), l, "job", nil, func(context.Context) error { panic("boom") })
	})
	_, err := l.TryLock(t.Context(), "job", time.Second)
	require.NoError(t, err, "key still held after a panic in fn")
}

// TestDoEndsFnContextByExpiresWhateverRenewDoes: fn's context ends at the lease's
// Expires while a renewal that ignores its ctx is stuck, and Do reports the loss.
func TestDoEndsFnContextByExpiresWhateverRenewDoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := locktest.NewDeafRenew(memlock.New())
		defer close(d.Release)
		var expires time.Time
		err := distlock.Do(t.Context(), d, "job", &distlock.DoOptions{TTL: 3 * time.Second, ReleaseTimeout: 100 * time.Millisecond},
			func(ctx context.Context) error {
				expires = time.Now().Add(3 * time.Second)
				<-ctx.Done()
				require.Zero(t, time.Since(expires), "fn's context did not end at the lease's Expires")
				return nil
			})
		require.ErrorIs(t, err, distlock.ErrNotHeld)
	})
}
