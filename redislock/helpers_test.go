package redislock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/redislock"
)

// newClient returns a go-redis client of srv, closed at t's cleanup.
func newClient(t testing.TB, srv *testenv.Server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newLockerOn returns a Locker over c, closed at t's cleanup (before c, when c was
// made first).
func newLockerOn(t testing.TB, c redis.UniversalClient, opts *redislock.Options) *redislock.Locker {
	t.Helper()
	l, err := redislock.New(c, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// newLocker returns a Locker on a new client of redisSrv.
func newLocker(t testing.TB, opts *redislock.Options) *redislock.Locker {
	t.Helper()
	return newLockerOn(t, newClient(t, redisSrv), opts)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func testKey(t *testing.T) string { return t.Name() + "-" + driver.NewToken()[:8] }
