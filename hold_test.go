package distlock_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/locktest"
	"github.com/distlock/distlock/memlock"
)

func TestHoldKeepsLeasePastTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &spy{Locker: memlock.New()}
		ttl := 150 * time.Millisecond
		lease, err := s.TryLock(t.Context(), "job", ttl)
		require.NoError(t, err)
		h := distlock.Hold(t.Context(), s, lease, &distlock.HoldOptions{TTL: ttl})
		time.Sleep(3*ttl + ttl/6) // the original ttl lapses three times over (between renewals)

		_, err = s.TryLock(t.Context(), "job", ttl)
		require.ErrorIs(t, err, distlock.ErrLocked, "a held key past its original ttl")
		require.NoError(t, h.Err())
		require.NoError(t, h.Context().Err())
		require.True(t, h.Lease().Expires.After(lease.Expires), "Lease() did not move forward")
		// Every defaults to TTL/3, and each renewal asks for TTL.
		renews := s.Renews()
		require.Len(t, renews, 9)
		for i, r := range renews {
			require.WithinDuration(t, lease.Expires.Add(-ttl).Add(time.Duration(i+1)*ttl/3), r.at, 0, "renewal %d", i)
			require.Equal(t, ttl, r.ttl, "renewal %d", i)
		}

		require.NoError(t, h.Release(t.Context()))
		cause := context.Cause(h.Context())
		require.Error(t, cause, "Release must cancel Context()")
		require.NotErrorIs(t, cause, distlock.ErrNotHeld, "a release is not a loss")
		_, err = s.TryLock(t.Context(), "job", ttl)
		require.NoError(t, err, "TryLock after Release")
		time.Sleep(time.Second)
		require.Len(t, s.Renews(), len(renews), "renewals after Release")
	})
}

// HoldOptions.TTL defaults to what the lease has left when Hold is called.
func TestHoldDefaultsToTheRemainingTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &spy{Locker: memlock.New()}
		lease, err := s.TryLock(t.Context(), "job", 90*time.Millisecond)
		require.NoError(t, err)
		time.Sleep(30 * time.Millisecond)
		start := time.Now()
		h := distlock.Hold(t.Context(), s, lease, nil)
		time.Sleep(100 * time.Millisecond)
		require.NoError(t, h.Release(t.Context()))
		renews := s.Renews()
		require.NotEmpty(t, renews)
		require.WithinDuration(t, start.Add(20*time.Millisecond), renews[0].at, 0, "Every defaults to TTL/3")
		require.Equal(t, 60*time.Millisecond, renews[0].ttl)
	})
}

func TestHoldSignalsLossAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wrap  func(*memlock.Locker) distlock.Locker
		every time.Duration
		late  time.Duration // how long after the loss Hold may notice it
	}{
		{"LossWatcher", func(m *memlock.Locker) distlock.Locker { return m }, 20 * time.Millisecond, 0},
		{"LossNotifier", func(m *memlock.Locker) distlock.Locker { return lossOnly{m} }, 20 * time.Millisecond, 0},
		{"Renew", func(m *memlock.Locker) distlock.Locker { return plain{m} }, 20 * time.Millisecond, 20 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := memlock.New()
				l := tc.wrap(m)
				lease, err := l.TryLock(t.Context(), "job", 300*time.Millisecond)
				require.NoError(t, err)
				h := distlock.Hold(t.Context(), l, lease, &distlock.HoldOptions{TTL: 300 * time.Millisecond, Every: tc.every})
				time.Sleep(50 * time.Millisecond)
				m.Revoke("job")
				revoked := time.Now()
				<-h.Context().Done()
				require.LessOrEqual(t, time.Since(revoked), tc.late, "loss noticed late")
				require.ErrorIs(t, context.Cause(h.Context()), distlock.ErrNotHeld)
				require.ErrorIs(t, h.Err(), distlock.ErrNotHeld)
				require.ErrorIs(t, h.Release(t.Context()), distlock.ErrNotHeld, "Release of a lost lease")
			})
		})
	}
}

func TestHoldRetriesTransientErrorsUntilExpires(t *testing.T) {
	// Renewals fail from the first one, or after one success.
	for _, okFirst := range []int{0, 1} {
		synctest.Test(t, func(t *testing.T) {
			s := &spy{Locker: memlock.New()}
			lease, err := s.TryLock(t.Context(), "job", 300*time.Millisecond)
			require.NoError(t, err)
			s.failRenew.Store(okFirst == 0)
			h := distlock.Hold(t.Context(), s, lease, &distlock.HoldOptions{TTL: 300 * time.Millisecond})
			for len(s.Renews()) < okFirst && time.Now().Before(lease.Expires) {
				time.Sleep(time.Millisecond)
			}
			s.failRenew.Store(true)
			last := h.Lease()
			require.Equal(t, okFirst > 0, last.Expires.After(lease.Expires))
			<-h.Context().Done()
			require.WithinDuration(t, last.Expires, time.Now(), 0, "a lease whose renewals fail transiently is lost at its Expires, not before or after")
			require.ErrorIs(t, context.Cause(h.Context()), distlock.ErrNotHeld)
			require.GreaterOrEqual(t, len(s.Renews()), okFirst+3, "transient errors must be retried")
			require.ErrorIs(t, h.Release(t.Context()), distlock.ErrNotHeld)
			// Release still gives the lease back, in case the server holds it: an
			// owner-checked Unlock that finds it gone changes nothing.
			require.Equal(t, 1, s.Unlocks(), "Release of a lease lost to failed renewals must try the Unlock")
		})
	}
}

func TestHoldRecoversFromTransientErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &spy{Locker: memlock.New()}
		ttl := 300 * time.Millisecond
		lease, err := s.TryLock(t.Context(), "job", ttl)
		require.NoError(t, err)
		s.failRenew.Store(true)
		h := distlock.Hold(t.Context(), s, lease, &distlock.HoldOptions{TTL: ttl})
		for len(s.Renews()) < 2 && time.Now().Before(lease.Expires) { // two failures, then the network heals
			time.Sleep(time.Millisecond)
		}
		require.Len(t, s.Renews(), 2, "renewal attempts before Expires")
		require.Less(t, time.Now(), lease.Expires)
		s.failRenew.Store(false)
		time.Sleep(ttl)
		require.NoError(t, h.Err(), "lost after the transient errors healed")
		require.True(t, h.Lease().Expires.After(lease.Expires), "Lease() did not move forward")
		require.NoError(t, h.Release(t.Context()))
	})
}

// When Hold's ctx ends, renewal stops and Context() ends, but the lease stays held
// until Release or its expiry.
func TestHoldStopsWhenCtxEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &spy{Locker: memlock.New()}
		ttl := 300 * time.Millisecond
		for _, key := range []string{"lapses", "released"} {
			lease, err := s.TryLock(t.Context(), key, ttl)
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(t.Context())
			h := distlock.Hold(ctx, s, lease, &distlock.HoldOptions{TTL: ttl})
			time.Sleep(ttl / 2) // one renewal, at ttl/3
			cancel()
			synctest.Wait()
			require.ErrorIs(t, context.Cause(h.Context()), context.Canceled, key)
			require.NoError(t, h.Err(), "%s: a cancelled Hold is not a lost lease", key)
			_, err = s.TryLock(t.Context(), key, ttl)
			require.ErrorIs(t, err, distlock.ErrLocked, "%s: the lease must stay held after ctx ended", key)

			if key == "lapses" {
				renews := len(s.Renews())
				time.Sleep(ttl)
				require.Len(t, s.Renews(), renews, "renewals after ctx ended")
				_, err = s.TryLock(t.Context(), key, ttl)
				require.NoError(t, err, "the lease did not lapse at its Expires")
				require.ErrorIs(t, h.Release(t.Context()), distlock.ErrNotHeld)
				continue
			}
			require.NoError(t, h.Release(t.Context()))
			_, err = s.TryLock(t.Context(), key, ttl)
			require.NoError(t, err, "Release after ctx ended must unlock")
		}
	})
}

// slowRenew's Renew returns 10ms after its ctx ends, as a reply still in flight
// would; Unlock notes whether it was called while a Renew was running.
type slowRenew struct {
	distlock.Locker
	inFlight, overlapped atomic.Bool
	entered              chan struct{}
}

func (s *slowRenew) Renew(ctx context.Context, l distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	s.inFlight.Store(true)
	defer s.inFlight.Store(false)
	s.entered <- struct{}{}
	<-ctx.Done()
	time.Sleep(10 * time.Millisecond)
	return distlock.Lease{}, ctx.Err()
}

func (s *slowRenew) Unlock(ctx context.Context, l distlock.Lease) error {
	if s.inFlight.Load() {
		s.overlapped.Store(true)
	}
	return s.Locker.Unlock(ctx, l)
}

func TestHoldReleaseWaitsForRenewalInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &slowRenew{Locker: memlock.New(), entered: make(chan struct{}, 1)}
		lease, err := l.TryLock(t.Context(), "job", time.Minute)
		require.NoError(t, err)
		h := distlock.Hold(t.Context(), l, lease, &distlock.HoldOptions{TTL: time.Minute})
		<-l.entered
		require.NoError(t, h.Release(t.Context()))
		require.False(t, l.overlapped.Load(), "Release unlocked while a renewal was in flight")
		_, err = l.TryLock(t.Context(), "job", time.Minute)
		require.NoError(t, err, "key held after Release")
	})
}

func TestHoldReleaseReturnsTheFirstResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &spy{Locker: memlock.New()}
		lease, err := s.TryLock(t.Context(), "job", time.Minute)
		require.NoError(t, err)
		h := distlock.Hold(t.Context(), s, lease, nil)
		s.failUnlock.Store(true)
		require.ErrorIs(t, h.Release(t.Context()), errTransport, "Release returns Unlock's error")
		s.failUnlock.Store(false)
		require.ErrorIs(t, h.Release(t.Context()), errTransport, "a second Release returns the first result")
		require.Equal(t, 1, s.Unlocks())
	})
}

func TestHoldRejectsBadOptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &spy{Locker: memlock.New()}
		lease, err := s.TryLock(t.Context(), "job", time.Minute)
		require.NoError(t, err)
		for name, opts := range map[string]*distlock.HoldOptions{
			"Every == TTL":   {TTL: time.Second, Every: time.Second},
			"Every > TTL":    {TTL: time.Second, Every: 2 * time.Second},
			"negative TTL":   {TTL: -time.Second},
			"negative Every": {Every: -time.Second},
		} {
			h := distlock.Hold(t.Context(), s, lease, opts)
			require.ErrorIs(t, h.Err(), distlock.ErrInvalid, name)
			require.Error(t, h.Context().Err(), "%s: Context() not cancelled", name)
			require.ErrorIs(t, h.Release(t.Context()), distlock.ErrInvalid, name)
		}
		require.Zero(t, s.Unlocks(), "Release of a Hold that never started unlocked")

		h := distlock.Hold(t.Context(), s, distlock.Lease{}, nil)
		require.Error(t, h.Err(), "Hold of a zero Lease")

		expired, err := s.TryLock(t.Context(), "other", 10*time.Millisecond)
		require.NoError(t, err)
		time.Sleep(10 * time.Millisecond)
		h = distlock.Hold(t.Context(), s, expired, nil)
		require.ErrorIs(t, h.Err(), distlock.ErrNotHeld, "Hold of an expired lease")
		synctest.Wait()
		require.Empty(t, s.Renews())
	})
}

// When the backend grants less than TTL (ZooKeeper caps Expires at the session
// timeout), Hold renews after a third of what was granted instead of after Every.
func TestHoldRenewsWithinAShorterGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &spy{Locker: memlock.New()}
		l := short{s, 150 * time.Millisecond}
		lease, err := l.TryLock(t.Context(), "job", time.Second)
		require.NoError(t, err)
		// TTL 1s would renew every 333ms: too late for a 150ms grant.
		h := distlock.Hold(t.Context(), l, lease, &distlock.HoldOptions{TTL: time.Second})
		time.Sleep(610 * time.Millisecond) // four grants' worth, between renewals
		require.NoError(t, h.Err(), "lost a lease renewed by Every instead of by what the backend granted")
		require.NoError(t, h.Release(t.Context()))
		for n, d := range gaps(append(s.Tries(), s.Renews()...)) {
			require.Equal(t, 50*time.Millisecond, d, "renewal %d", n)
		}
	})
}

// Waiting for its next renewal, a Held costs no goroutine on a Locker that is no
// LossNotifier or is a LossWatcher (one on a LossNotifier only, for its loss
// signal), so that one process can hold many leases; each keeps renewing.
func TestHoldCostsNoGoroutineBetweenRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ml := memlock.New()
		for _, c := range []struct {
			l       distlock.Locker
			perHold int
		}{{plain{ml}, 0}, {lossOnly{ml}, 1}, {ml, 0}} {
			const n = 100
			ttl := 300 * time.Millisecond
			synctest.Wait()
			before := runtime.NumGoroutine()
			hs := make([]*distlock.Held, n)
			for i := range hs {
				lease, err := c.l.TryLock(t.Context(), fmt.Sprint("k", i), ttl)
				require.NoError(t, err)
				hs[i] = distlock.Hold(t.Context(), c.l, lease, &distlock.HoldOptions{TTL: ttl})
			}
			time.Sleep(5 * ttl)
			synctest.Wait()
			// NumGoroutine counts the goroutines outside the bubble too: allow for a few
			// of earlier tests that are still ending.
			require.InDelta(t, before+n*c.perHold, runtime.NumGoroutine(), 3, "goroutines while %d leases are held", n)
			for _, h := range hs {
				require.NoError(t, h.Err())
				require.NoError(t, h.Release(t.Context()))
			}
			synctest.Wait()
			require.InDelta(t, before, runtime.NumGoroutine(), 3, "goroutines after Release")
		}
	})
}

// lossOnly hides memlock's LossWatcher: Hold waits on Lost's channel.
type lossOnly struct{ m *memlock.Locker }

func (l lossOnly) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	return l.m.TryLock(ctx, key, ttl)
}

func (l lossOnly) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	return l.m.Renew(ctx, lease, ttl)
}

func (l lossOnly) Unlock(ctx context.Context, lease distlock.Lease) error {
	return l.m.Unlock(ctx, lease)
}

func (l lossOnly) Lost(lease distlock.Lease) <-chan struct{} { return l.m.Lost(lease) }

// TestHoldEndsByExpiresWhateverRenewDoes: a Held's Context ends at its lease's
// Expires even while a Renew that ignores its ctx is still in flight, and Release
// returns by its own ctx instead of waiting for that Renew.
func TestHoldEndsByExpiresWhateverRenewDoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := locktest.NewDeafRenew(memlock.New())
		defer close(d.Release)
		lease, err := d.TryLock(t.Context(), "job", 3*time.Second)
		require.NoError(t, err)
		h := distlock.Hold(t.Context(), d, lease, &distlock.HoldOptions{TTL: 3 * time.Second})
		ctx := h.Context()
		<-d.Entered // the first renewal, at Every = 1s, never returns
		<-ctx.Done()
		require.False(t, time.Now().Before(lease.Expires), "Context ended before Expires")
		require.Zero(t, time.Since(lease.Expires), "Context did not end at the lease's Expires")
		require.ErrorIs(t, context.Cause(ctx), distlock.ErrNotHeld)
		require.ErrorIs(t, h.Err(), distlock.ErrNotHeld)

		rctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		require.ErrorIs(t, h.Release(rctx), distlock.ErrNotHeld)
		require.Equal(t, 100*time.Millisecond, time.Since(start), "Release waited past its ctx for the stuck renewal")
	})
}
