package distlock_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/memlock"
)

func TestLockWaitsForUnlock(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(*memlock.Locker) distlock.Locker
		late time.Duration // how long after the Unlock Lock may acquire
	}{
		// Wait wakes Lock at the Unlock: the hour-long backoff is never slept.
		{"Waiter", func(m *memlock.Locker) distlock.Locker { return m }, 0},
		{"backoff", func(m *memlock.Locker) distlock.Locker { return plain{m} }, 20 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := tc.wrap(memlock.New())
				first, err := l.TryLock(t.Context(), "job", time.Hour)
				require.NoError(t, err)
				opts := &distlock.LockOptions{MinBackoff: time.Hour, MaxBackoff: time.Hour}
				if tc.late > 0 {
					opts = &distlock.LockOptions{MaxBackoff: tc.late}
				}
				got := make(chan distlock.Lease, 1)
				go func() {
					lease, err := distlock.Lock(t.Context(), l, "job", time.Minute, opts)
					if err != nil {
						t.Error(err)
					}
					got <- lease
				}()
				time.Sleep(time.Second) // Lock waits while the key is held
				synctest.Wait()
				require.Empty(t, got, "Lock returned while the key was held")

				require.NoError(t, l.Unlock(t.Context(), first))
				unlocked := time.Now()
				second := <-got
				require.LessOrEqual(t, time.Since(unlocked), tc.late, "Lock acquired too long after the Unlock")
				require.Greater(t, second.Fence, first.Fence)
			})
		})
	}
}

func TestLockGivesUpWithJoinedError(t *testing.T) {
	for name, wrap := range map[string]func(*memlock.Locker) distlock.Locker{
		"Waiter":  func(m *memlock.Locker) distlock.Locker { return m },
		"backoff": func(m *memlock.Locker) distlock.Locker { return plain{m} },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := wrap(memlock.New())
				_, err := l.TryLock(t.Context(), "job", time.Hour)
				require.NoError(t, err)
				ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
				defer cancel()
				start := time.Now()
				_, err = distlock.Lock(ctx, l, "job", time.Minute, nil)
				require.ErrorIs(t, err, distlock.ErrLocked)
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.Equal(t, 50*time.Millisecond, time.Since(start), "Lock must return as soon as ctx ends")
			})
		})
	}
}

// cutShort answers its first TryLock with ErrLocked; every later one blocks until
// ctx ends and fails as a dial cut short by the deadline does: with an error that
// wraps context.DeadlineExceeded but not ErrLocked.
type cutShort struct {
	calls atomic.Int32
	early time.Duration // how long before ctx's deadline the cut attempt fails
}

func (c *cutShort) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	if c.calls.Add(1) == 1 {
		return distlock.Lease{}, &distlock.OpError{Backend: "test", Op: "TryLock", Key: key, Err: distlock.ErrLocked}
	}
	d, _ := ctx.Deadline()
	time.Sleep(time.Until(d) - c.early)
	return distlock.Lease{}, &distlock.OpError{Backend: "test", Op: "TryLock", Key: key, Err: fmt.Errorf("dial: i/o timeout: %w", context.DeadlineExceeded)}
}

func (c *cutShort) Renew(context.Context, distlock.Lease, time.Duration) (distlock.Lease, error) {
	return distlock.Lease{}, distlock.ErrNotHeld
}

func (c *cutShort) Unlock(context.Context, distlock.Lease) error { return distlock.ErrNotHeld }

// When ctx's end cuts the last attempt short, Lock still says that the key was held
// (the lockdlock suite saw "dial tcp: i/o timeout" instead of ErrLocked).
func TestLockGivesUpWithContentionWhenTheLastAttemptIsCutShort(t *testing.T) {
	// At the deadline, or a hair before it (the dial's own timer fired first).
	for _, early := range []time.Duration{0, 100 * time.Microsecond} {
		t.Run(early.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
				defer cancel()
				start := time.Now()
				l := &cutShort{early: early}
				_, err := distlock.Lock(ctx, l, "job", time.Minute, &distlock.LockOptions{MaxBackoff: 10 * time.Millisecond})
				require.EqualValues(t, 2, l.calls.Load(), "the second attempt is the one cut short")
				require.ErrorIs(t, err, distlock.ErrLocked)
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.Equal(t, 50*time.Millisecond, time.Since(start))
			})
		})
	}
}

func TestLockRetriesTransportErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &spy{Locker: memlock.New()}
		s.failTry.Store(3)
		lease, err := distlock.Lock(t.Context(), s, "job", time.Minute, &distlock.LockOptions{MinBackoff: time.Millisecond})
		require.NoError(t, err, "Lock after 3 transport errors")
		require.NotZero(t, lease.Fence)
		require.Len(t, s.Tries(), 4)

		// When ctx ends during transport errors, the error says so: not ErrLocked.
		s.failTry.Store(1 << 30)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
		defer cancel()
		_, err = distlock.Lock(ctx, s, "other", time.Minute, nil)
		require.ErrorIs(t, err, errTransport)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NotErrorIs(t, err, distlock.ErrLocked)
	})
}

// The n-th sleep between attempts is uniform in (0, min(MaxBackoff, MinBackoff*2^n)].
func TestLockBackoffIsExponentialFullJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &spy{Locker: memlock.New()}
		_, err := s.TryLock(t.Context(), "job", time.Hour)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		minB, maxB := 10*time.Millisecond, 80*time.Millisecond
		_, err = distlock.Lock(ctx, s, "job", time.Minute, &distlock.LockOptions{MinBackoff: minB, MaxBackoff: maxB})
		require.ErrorIs(t, err, distlock.ErrLocked)

		sleeps := gaps(s.Tries()[1:]) // the first TryLock is the holder's
		require.GreaterOrEqual(t, len(sleeps), int(2*time.Second/maxB)-1)
		distinct := map[time.Duration]bool{}
		for n, d := range sleeps {
			ceil := min(maxB, minB<<min(n, 30))
			require.Positive(t, d, "sleep %d: Lock busy-loops", n)
			require.LessOrEqual(t, d, ceil, "sleep %d above its ceiling", n)
			distinct[d] = true
		}
		require.Greater(t, len(distinct), len(sleeps)/2, "sleeps without jitter: %v", sleeps)
	})
}

// A lost wake-up costs at most MaxWait, and at least half of it: Lock tries
// again when each Wait ends, at a time that differs between waiters.
func TestLockWaitIsBoundedByMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memlock.New()
		l := deafWaiter{m}
		held, err := m.TryLock(t.Context(), "job", time.Hour)
		require.NoError(t, err)
		const waiters = 20
		tried := make(chan time.Duration, waiters)
		start := time.Now()
		for range waiters {
			go func() {
				// Each gives up after its first Wait: only the Wait's end is timed.
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				_, err := distlock.Lock(ctx, l, "job", time.Minute, &distlock.LockOptions{
					MaxWait: time.Second, MinBackoff: time.Hour, MaxBackoff: time.Hour,
					Observer: distlock.Observer{OnEvent: func(_ context.Context, e distlock.Event) {
						if e.Op == distlock.OpWait {
							tried <- time.Since(start)
							cancel()
						}
					}},
				})
				assert.ErrorIs(t, err, context.Canceled)
			}()
		}
		distinct := map[time.Duration]bool{}
		for range waiters {
			d := <-tried
			require.GreaterOrEqual(t, d, 500*time.Millisecond, "a Wait cut before MaxWait/2")
			require.LessOrEqual(t, d, time.Second, "a Wait longer than MaxWait")
			distinct[d] = true
		}
		require.Greater(t, len(distinct), waiters/2, "waiters that began together try again together")

		got := make(chan error, 1)
		go func() {
			_, err := distlock.Lock(t.Context(), l, "job", time.Minute, &distlock.LockOptions{MaxWait: time.Second, MinBackoff: time.Hour, MaxBackoff: time.Hour})
			got <- err
		}()
		synctest.Wait() // Lock waits
		start = time.Now()
		require.NoError(t, m.Unlock(t.Context(), held)) // the Waiter misses this
		require.NoError(t, <-got)
		took := time.Since(start)
		require.GreaterOrEqual(t, took, 500*time.Millisecond, "Lock did not wait")
		require.LessOrEqual(t, took, time.Second, "Lock acquired later than MaxWait after a lost wake-up")
	})
}

// When Wait fails, Lock falls back to backoff; a Wait that says ErrInvalid ends Lock.
func TestLockWhenWaitFails(t *testing.T) {
	t.Run("transport error", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := &spy{Locker: memlock.New()}
			l := brokenWaiter{s, errTransport}
			held, err := s.TryLock(t.Context(), "job", time.Hour)
			require.NoError(t, err)
			got := make(chan error, 1)
			go func() {
				_, err := distlock.Lock(t.Context(), l, "job", time.Minute, &distlock.LockOptions{MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
				got <- err
			}()
			time.Sleep(time.Second)
			for n, d := range gaps(s.Tries()[1:]) {
				require.Positive(t, d, "sleep %d: Lock busy-loops on a failing Wait", n)
			}
			require.NoError(t, s.Unlock(t.Context(), held))
			unlocked := time.Now()
			require.NoError(t, <-got)
			require.LessOrEqual(t, time.Since(unlocked), 20*time.Millisecond)
		})
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := memlock.New()
			_, err := m.TryLock(t.Context(), "job", time.Hour)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			start := time.Now()
			_, err = distlock.Lock(ctx, brokenWaiter{m, distlock.ErrInvalid}, "job", time.Minute, nil)
			require.ErrorIs(t, err, distlock.ErrInvalid)
			require.Zero(t, time.Since(start), "Lock retried after Wait said ErrInvalid")
		})
	})
}

func TestLockRejectsBadInput(t *testing.T) {
	for name, opts := range map[string]*distlock.LockOptions{
		"MaxBackoff below MinBackoff": {MinBackoff: time.Second, MaxBackoff: time.Millisecond},
		"negative MinBackoff":         {MinBackoff: -time.Second},
		"negative MaxBackoff":         {MaxBackoff: -time.Second},
		"negative MaxWait":            {MaxWait: -time.Second},
	} {
		s := &spy{Locker: memlock.New()}
		_, err := distlock.Lock(t.Context(), s, "k", time.Minute, opts)
		require.ErrorIs(t, err, distlock.ErrInvalid, name)
		require.Empty(t, s.Tries(), "%s: TryLock called with bad options", name)
	}
	_, err := distlock.Lock(t.Context(), memlock.New(), "", time.Minute, nil)
	require.ErrorIs(t, err, distlock.ErrInvalid, "empty key")
}

func TestLockPollsAtTheHoldersExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := inspectOnly{memlock.New()}
		held, err := l.TryLock(t.Context(), "job", 300*time.Millisecond)
		require.NoError(t, err)
		// With a 10s backoff ceiling, only the Inspector can make Lock wake at expiry.
		opts := &distlock.LockOptions{MinBackoff: 5 * time.Second, MaxBackoff: 10 * time.Second}
		lease, err := distlock.Lock(t.Context(), l, "job", time.Second, opts)
		require.NoError(t, err)
		late := time.Since(held.Expires)
		require.True(t, late >= 0 && late <= time.Millisecond, "acquired %v after the holder's expiry", late)
		require.NoError(t, l.Unlock(t.Context(), lease))
	})
}

// A closed Locker ends Lock at once: retrying cannot help.
func TestLockReturnsErrClosedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memlock.New()
		require.NoError(t, l.Close())
		start := time.Now()
		_, err := distlock.Lock(t.Context(), l, "job", time.Second, nil)
		require.ErrorIs(t, err, distlock.ErrClosed)
		require.Zero(t, time.Since(start))
	})
}
