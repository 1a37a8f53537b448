package driver

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/distlock/distlock"
	"github.com/stretchr/testify/require"
)

// fake is a Driver whose every operation takes delay, then answers err (when set)
// or succeeds with fence 1; it counts its calls. abandonErrs is how many Abandons
// fail before one succeeds.
type fake struct {
	delay       time.Duration
	err         error
	retryable   error
	definite    error
	abandonErrs int

	mu       sync.Mutex
	calls    map[string]int
	abandons []context.Context
	ctxErrs  []error // of each Abandon's context when it was called
	closed   int
}

func (f *fake) count(op string) error {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[op]++
	f.mu.Unlock()
	return f.err
}

func (f *fake) n(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

func (f *fake) wait(ctx context.Context) error {
	select {
	case <-time.After(f.delay):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fake) Acquire(ctx context.Context, _, _ string, _ time.Duration) (uint64, error) {
	if err := f.count("Acquire"); err != nil {
		return 0, err
	}
	return 1, f.wait(ctx)
}

func (f *fake) Renew(ctx context.Context, _ distlock.Lease, _ time.Duration) error {
	if err := f.count("Renew"); err != nil {
		return err
	}
	return f.wait(ctx)
}

func (f *fake) Release(ctx context.Context, _ distlock.Lease) error {
	if err := f.count("Release"); err != nil {
		return err
	}
	return f.wait(ctx)
}

func (f *fake) Abandon(ctx context.Context, _, _ string, _ time.Duration, _ error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.abandons = append(f.abandons, ctx)
	f.ctxErrs = append(f.ctxErrs, ctx.Err())
	if len(f.abandons) <= f.abandonErrs {
		return errors.New("not yet")
	}
	return nil
}

func (f *fake) Retryable(err error) bool { return f.retryable != nil && errors.Is(err, f.retryable) }
func (f *fake) Definite(err error) bool  { return f.definite != nil && errors.Is(err, f.definite) }

func (f *fake) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed++
	return nil
}

func newFake(t *testing.T, f *fake, c Config) *Locker {
	t.Helper()
	c.Backend = "fake"
	l, err := NewLocker(f, c)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return l
}

// TestExpires: Expires counts from before the request, less the drift; a reply
// that comes after that is an error, and the acquire is abandoned.
func TestExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{delay: 100 * time.Millisecond}
		drift := func(ttl time.Duration) time.Duration { return ttl / 100 }
		l := newFake(t, f, Config{Drift: drift})
		start := time.Now()
		lease, err := l.TryLock(t.Context(), "k", time.Second)
		require.NoError(t, err)
		require.Equal(t, start.Add(990*time.Millisecond), lease.Expires)
		next, err := l.Renew(t.Context(), lease, 2*time.Second)
		require.NoError(t, err)
		require.Equal(t, start.Add(100*time.Millisecond+2*time.Second-20*time.Millisecond), next.Expires)

		_, err = l.TryLock(t.Context(), "k", 100*time.Millisecond) // the reply takes the whole ttl
		require.ErrorContains(t, err, "already expired")
		synctest.Wait()
		require.Len(t, f.abandons, 1)
		_, err = l.Renew(t.Context(), lease, 100*time.Millisecond)
		require.ErrorContains(t, err, "old Lease's Expires still stands")
	})
}

// TestRenewAfterExpires: a Renew of a lease whose Expires passed is ErrNotHeld
// without a request.
func TestRenewAfterExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{}
		l := newFake(t, f, Config{})
		lease, err := l.TryLock(t.Context(), "k", time.Second)
		require.NoError(t, err)
		time.Sleep(time.Second)
		_, err = l.Renew(t.Context(), lease, time.Second)
		require.ErrorIs(t, err, distlock.ErrNotHeld)
		require.Zero(t, f.n("Renew"))
	})
}

// TestAbandon: an Acquire of unknown outcome is abandoned in the background, on a
// context that is not the caller's and ends at CleanupTimeout, again until Abandon
// succeeds; Close waits for it. A definite error, ErrLocked and a request that was
// never sent are not abandoned.
func TestAbandon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{delay: time.Second, abandonErrs: 2}
		l := newFake(t, f, Config{CleanupTimeout: time.Minute})
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		defer cancel()
		_, err := l.TryLock(ctx, "k", time.Hour)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorContains(t, err, "outcome unknown")
		gaveUp := time.Now()
		require.NoError(t, l.Close())
		require.Len(t, f.abandons, 3)
		dl, ok := f.abandons[0].Deadline()
		require.True(t, ok)
		require.Equal(t, gaveUp.Add(time.Minute), dl)
		require.Equal(t, []error{nil, nil, nil}, f.ctxErrs, "the Abandon's context is the caller's")

		for _, e := range []error{distlock.ErrLocked, NotSent(errors.New("no connection")), errDefinite} {
			f := &fake{err: e, definite: errDefinite}
			l := newFake(t, f, Config{})
			_, err := l.TryLock(t.Context(), "k", time.Hour)
			require.ErrorIs(t, err, e)
			synctest.Wait()
			require.Empty(t, f.abandons, "after %v", e)
		}
	})
}

var errDefinite = errors.New("definite")

// TestRetries: a Retryable error is retried, up to MaxAttempts.
func TestRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		busy := errors.New("busy")
		f := &fake{err: busy, retryable: busy}
		l := newFake(t, f, Config{})
		lease := distlock.Lease{Key: "k", Token: "t", Fence: 1, Expires: time.Now().Add(time.Hour)}
		require.ErrorIs(t, l.Unlock(t.Context(), lease), busy)
		require.Equal(t, MaxAttempts, f.n("Release"))
	})
}

// TestClose: Close ends the calls in flight with ErrClosed, waits for them, runs
// the Driver's Close once; every later call is ErrClosed.
func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{delay: time.Hour}
		l, err := NewLocker(f, Config{Backend: "fake"})
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { _, err := l.TryLock(t.Context(), "k", time.Hour); done <- err }()
		synctest.Wait()
		require.NoError(t, l.Close())
		require.ErrorIs(t, <-done, distlock.ErrClosed)
		require.NoError(t, l.Close())
		require.Equal(t, 1, f.closed)
		_, err = l.TryLock(t.Context(), "k", time.Hour)
		require.ErrorIs(t, err, distlock.ErrClosed)
		var oe *distlock.OpError
		require.ErrorAs(t, err, &oe)
		require.Equal(t, "fake", oe.Backend)
	})
}

// TestInput: bad keys, ttls and leases are ErrInvalid before any request; a bad
// Config is NewLocker's error.
func TestInput(t *testing.T) {
	f := &fake{}
	l := newFake(t, f, Config{MaxKeyLen: 4})
	good := distlock.Lease{Key: "k", Token: "t", Fence: 1, Expires: time.Now().Add(time.Hour)}
	for name, err := range map[string]error{
		"empty key": func() error { _, err := l.TryLock(t.Context(), "", time.Second); return err }(),
		"long key":  func() error { _, err := l.TryLock(t.Context(), "12345", time.Second); return err }(),
		"zero ttl":  func() error { _, err := l.TryLock(t.Context(), "k", 0); return err }(),
		"renew ttl": func() error { _, err := l.Renew(t.Context(), good, -1); return err }(),
		"no token":  l.Unlock(t.Context(), distlock.Lease{Key: "k", Fence: 1}),
		"zero":      l.Unlock(t.Context(), distlock.Lease{}),
	} {
		require.ErrorIs(t, err, distlock.ErrInvalid, name)
	}
	require.Zero(t, f.n("Acquire")+f.n("Renew")+f.n("Release"))
	_, err := NewLocker(nil, Config{Backend: "x"})
	require.ErrorIs(t, err, distlock.ErrInvalid)
	_, err = NewLocker(f, Config{})
	require.ErrorIs(t, err, distlock.ErrInvalid)
}
