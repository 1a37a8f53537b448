package memlock

import (
	"context"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// table is the driver.Driver of a Locker: each operation acts on the lock table at
// once, under l.mu. Expiry is on the process's monotonic clock, counted from when
// the operation ran, which is after the core's start: the table never frees a key
// before the Expires the holder was told.
type table Locker

var (
	_ driver.Driver    = (*table)(nil)
	_ driver.Inspector = (*table)(nil)
	_ driver.Closer    = (*table)(nil)
)

func (t *table) Acquire(_ context.Context, key, token string, ttl time.Duration) (uint64, error) {
	l := (*Locker)(t)
	l.waiters.Attempt(key)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	s := l.get(key)
	if s.held(now) {
		return 0, distlock.ErrLocked
	}
	if s.token != "" { // expired without Unlock: signal the old lease's loss
		s.release()
	}
	s.fence++
	s.token = token
	s.expires = now.Add(ttl)
	return s.fence, nil
}

func (t *table) Renew(_ context.Context, lease distlock.Lease, ttl time.Duration) error {
	l := (*Locker)(t)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	s := l.owned(lease, now)
	if s == nil {
		return distlock.ErrNotHeld
	}
	if e := now.Add(ttl); e.After(s.expires) {
		s.expires = e
	}
	return nil
}

func (t *table) Release(_ context.Context, lease distlock.Lease) error {
	l := (*Locker)(t)
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.owned(lease, time.Now())
	if s == nil {
		return distlock.ErrNotHeld
	}
	l.free(lease.Key, s)
	return nil
}

// Abandon is never needed (every Acquire has a definite outcome); it releases key
// if token holds it.
func (t *table) Abandon(ctx context.Context, key, token string, _ time.Duration, _ error) error {
	err := t.Release(ctx, distlock.Lease{Key: key, Token: token})
	if err == distlock.ErrNotHeld {
		return nil
	}
	return err
}

func (t *table) Inspect(_ context.Context, key string) (distlock.Holder, time.Duration, error) {
	l := (*Locker)(t)
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.keys[key]
	now := time.Now()
	if s == nil || !s.held(now) {
		return distlock.Holder{}, 0, distlock.ErrNotHeld
	}
	return distlock.Holder{Fence: s.fence, Owner: Owner}, s.expires.Sub(now), nil
}

// Close makes every Wait return an error wrapping distlock.ErrClosed.
func (t *table) Close() error {
	l := (*Locker)(t)
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.closed)
	l.waiters.Close()
	return nil
}
