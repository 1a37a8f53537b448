package distlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/distlock/distlock"
)

// The root's tests run Lock, Hold and Do against memlock, created inside a
// testing/synctest bubble whenever a test waits on timers, so that backoff, renewal
// schedules, expiry and MinHold run in fake time: exact and instant. The doubles
// below wrap a memlock Locker to hide its optional interfaces, record calls, or fail.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errTransport = errors.New("transport: connection refused")

// plain hides a Locker's optional interfaces (Waiter, Inspector, LossNotifier).
type plain struct{ distlock.Locker }

// call is one recorded TryLock or Renew: when it was made and the ttl it asked for.
type call struct {
	at  time.Time
	ttl time.Duration
}

// spy wraps a Locker and hides its optional interfaces. It records every TryLock,
// Renew and Unlock, and fails them with errTransport on demand: the next failTry
// TryLocks, every Renew while failRenew is set, every Unlock while failUnlock is set.
type spy struct {
	distlock.Locker
	failTry    atomic.Int32
	failRenew  atomic.Bool
	failUnlock atomic.Bool

	mu      sync.Mutex
	tries   []call
	renews  []call
	unlocks int
}

func (s *spy) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	s.mu.Lock()
	s.tries = append(s.tries, call{time.Now(), ttl})
	s.mu.Unlock()
	if s.failTry.Add(-1) >= 0 {
		return distlock.Lease{}, errTransport
	}
	return s.Locker.TryLock(ctx, key, ttl)
}

func (s *spy) Renew(ctx context.Context, l distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	s.mu.Lock()
	s.renews = append(s.renews, call{time.Now(), ttl})
	s.mu.Unlock()
	if s.failRenew.Load() {
		return distlock.Lease{}, errTransport
	}
	return s.Locker.Renew(ctx, l, ttl)
}

func (s *spy) Unlock(ctx context.Context, l distlock.Lease) error {
	s.mu.Lock()
	s.unlocks++
	s.mu.Unlock()
	if s.failUnlock.Load() {
		return errTransport
	}
	return s.Locker.Unlock(ctx, l)
}

// Tries returns the TryLock calls so far.
func (s *spy) Tries() []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]call(nil), s.tries...)
}

// Renews returns the Renew calls so far.
func (s *spy) Renews() []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]call(nil), s.renews...)
}

// Unlocks returns how many times Unlock was called.
func (s *spy) Unlocks() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unlocks
}

// gaps returns the time between consecutive calls.
func gaps(calls []call) []time.Duration {
	var d []time.Duration
	for i := 1; i < len(calls); i++ {
		d = append(d, calls[i].at.Sub(calls[i-1].at))
	}
	return d
}

// inspectOnly hides Waiter and LossNotifier but keeps Inspector.
type inspectOnly struct{ distlock.Locker }

func (i inspectOnly) Inspect(ctx context.Context, key string) (distlock.Holder, error) {
	return i.Locker.(distlock.Inspector).Inspect(ctx, key)
}

// deafWaiter is a Waiter that never hears a release (a lost wake-up): its Wait
// returns only when ctx ends.
type deafWaiter struct{ distlock.Locker }

func (deafWaiter) Wait(ctx context.Context, key string) error {
	<-ctx.Done()
	return errors.Join(distlock.ErrLocked, ctx.Err())
}

// brokenWaiter is a Waiter whose Wait fails at once with err.
type brokenWaiter struct {
	distlock.Locker
	err error
}

func (b brokenWaiter) Wait(context.Context, string) error { return b.err }

// short grants at most cap, whatever ttl is asked (as ZooKeeper caps at the session
// timeout).
type short struct {
	distlock.Locker
	cap time.Duration
}

func (s short) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	return s.Locker.TryLock(ctx, key, min(ttl, s.cap))
}

func (s short) Renew(ctx context.Context, l distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	return s.Locker.Renew(ctx, l, min(ttl, s.cap))
}
