package redislock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/faultproxy"
	"github.com/distlock/distlock/redislock"
)

// sentHook signals on sent each command that the client is about to send.
type sentHook struct{ sent chan struct{} }

func (sentHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h sentHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		select {
		case h.sent <- struct{}{}:
		default:
		}
		return next(ctx, cmd)
	}
}

func (sentHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestCloseBackgroundCall: a TryLock with context.Background() runs its request on
// its caller's goroutine, so only Close can end it, and Close does so when that
// request ends (by the client's ReadTimeout), not at once: Close returns after the
// call and the clean-up of its unknown outcome, and the call's error wraps
// ErrClosed.
func TestCloseBackgroundCall(t *testing.T) {
	p, err := faultproxy.New(redisSrv.Addr(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	const readTimeout = 500 * time.Millisecond
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: readTimeout, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.Ping(t.Context()).Err())
	l, err := redislock.New(c, &redislock.Options{CleanupTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	hook := sentHook{sent: make(chan struct{}, 1)}
	c.AddHook(hook)

	p.Blackhole()
	done := make(chan error, 1)
	go func() {
		_, err := l.TryLock(context.Background(), testKey(t), time.Minute)
		done <- err
	}()
	select {
	case <-hook.sent:
	case <-time.After(10 * time.Second):
		t.Fatal("TryLock sent no request")
	}
	start := time.Now()
	require.NoError(t, l.Close())
	took := time.Since(start)
	select {
	case err = <-done:
	default:
		t.Fatal("Close returned before the call in flight")
	}
	require.ErrorIs(t, err, distlock.ErrClosed)
	// The request ends by the ReadTimeout, its clean-up by another (go-redis
	// ignores the clean-up's context while it waits for a reply).
	require.Less(t, took, 2*readTimeout+2*time.Second, "Close took %v", took)
	t.Logf("Close returned after %v: %v", took, err)
}
