package sqllock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/stretchr/testify/require"
)

// slowDialect answers every statement after delay, as a database whose replies take
// that long; acquire wins with fence 1. It records the releases.
type slowDialect struct {
	dialect
	delay time.Duration

	mu       sync.Mutex
	released [][]byte // tokens
}

func (d *slowDialect) acquire(ctx context.Context, _, _, _ []byte, _ time.Duration) (int64, bool, session, error) {
	time.Sleep(d.delay)
	return 1, true, session{}, nil
}

func (d *slowDialect) renew(context.Context, []byte, []byte, []byte, time.Duration) (bool, error) {
	time.Sleep(d.delay)
	return true, nil
}

func (d *slowDialect) release(_ context.Context, _, _, token []byte) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.released = append(d.released, token)
	return true, nil
}

func (d *slowDialect) retryable(error) bool { return false }
func (d *slowDialect) definite(error) bool  { return false }

// TestReplyAfterTTL: when the reply comes after the ttl, TryLock and Renew return an
// error that is neither ErrLocked nor ErrNotHeld instead of a lease that has already
// expired, and TryLock releases the row it took.
func TestReplyAfterTTL(t *testing.T) {
	const ttl = 20 * time.Millisecond
	d := &slowDialect{delay: 2 * ttl}
	l := &Locker{d: d}
	_, err := l.TryLock(t.Context(), "k", ttl)
	require.Error(t, err, "TryLock whose reply came after its ttl returned a lease")
	require.False(t, errors.Is(err, distlock.ErrLocked) || errors.Is(err, distlock.ErrNotHeld), "TryLock: %v", err)
	l.waitCleanups()
	d.mu.Lock()
	require.Len(t, d.released, 1, "TryLock did not release the row of its expired lease")
	d.mu.Unlock()

	lease := distlock.Lease{Key: "k", Token: "t", Fence: 1, Expires: time.Now().Add(time.Minute)}
	_, err = l.Renew(t.Context(), lease, ttl)
	require.Error(t, err, "Renew whose reply came after its ttl returned a lease")
	require.False(t, errors.Is(err, distlock.ErrLocked) || errors.Is(err, distlock.ErrNotHeld), "Renew: %v", err)
}
