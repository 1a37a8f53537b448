package backendtest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/memlock"
)

// memBackend's clients share one memlock.Locker, the "server", for the whole test
// binary (tests use keys of their own). It has no goroutines, so it is never closed.
func memBackend() Backend {
	server := memlock.New()
	return Backend{
		Name: "memlock",
		NewClient: func(t testing.TB, owner string) Client {
			c := &memClient{server: server}
			return Client{Locker: c, Crash: func() { c.crashed.Store(true) }}
		},
		TTL:   500 * time.Millisecond,
		Freed: 500*time.Millisecond + 250*time.Millisecond,
	}
}

// A memClient is a client of a shared memlock.Locker that can crash: once crashed,
// every call fails with a transport error, and its leases lapse on the "server".
type memClient struct {
	server  *memlock.Locker
	crashed atomic.Bool
}

var (
	_ distlock.Waiter       = (*memClient)(nil)
	_ distlock.Inspector    = (*memClient)(nil)
	_ distlock.LossNotifier = (*memClient)(nil)
)

func (c *memClient) check(op, key string) error {
	if c.crashed.Load() {
		return &distlock.OpError{Backend: "memlock", Op: op, Key: key, Err: errCrashed}
	}
	return nil
}

func (c *memClient) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	if err := c.check("TryLock", key); err != nil {
		return distlock.Lease{}, err
	}
	return c.server.TryLock(ctx, key, ttl)
}

func (c *memClient) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	if err := c.check("Renew", lease.Key); err != nil {
		return distlock.Lease{}, err
	}
	return c.server.Renew(ctx, lease, ttl)
}

func (c *memClient) Unlock(ctx context.Context, lease distlock.Lease) error {
	if err := c.check("Unlock", lease.Key); err != nil {
		return err
	}
	return c.server.Unlock(ctx, lease)
}

func (c *memClient) Wait(ctx context.Context, key string) error {
	if err := c.check("Wait", key); err != nil {
		return err
	}
	return c.server.Wait(ctx, key)
}

func (c *memClient) Inspect(ctx context.Context, key string) (distlock.Holder, error) {
	if err := c.check("Inspect", key); err != nil {
		return distlock.Holder{}, err
	}
	return c.server.Inspect(ctx, key)
}

// Lost is the server's: a crashed process would learn nothing, but its Hold gives
// the lease up at Expires anyway.
func (c *memClient) Lost(lease distlock.Lease) <-chan struct{} { return c.server.Lost(lease) }
