package redisx_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/redisx"
)

// slowFirst delays the first command it sees (a hung connection, as far as its
// caller can tell).
type slowFirst struct {
	delay time.Duration
	seen  atomic.Bool
}

func (h *slowFirst) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *slowFirst) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !h.seen.Swap(true) {
			time.Sleep(h.delay)
		}
		return next(ctx, cmd)
	}
}

func (h *slowFirst) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestRunSharedStall: a RunShared call in flight that hangs holds up the later ones
// only for redisx.SharedStall: then they go alone.
func TestRunSharedStall(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redisSrv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.Ping(t.Context()).Err())
	n := redisx.NewNode(c, 0, "redis", time.Second, redisx.HubConfig{})
	t.Cleanup(n.Hub.Close)
	g := redisx.NewGroup()
	n.SetGroup(g)
	n.SetSharedSlots(1)           // the next call queues behind the one in flight
	require.NoError(t, g.Enter()) // the test is one long call of the Group
	t.Cleanup(func() {
		g.Leave()
		g.Close()
		g.Wait()
	})
	lock := "stall-" + driver.NewToken()[:8]
	// Load the renew script first, so that no NOSCRIPT round trip muddles timing.
	_, err := n.RenewShared(t.Context(), lock, "t", 1000)
	require.NoError(t, err)
	const delay = 2 * time.Second
	c.AddHook(&slowFirst{delay: delay})
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := n.RenewShared(context.Background(), lock, "t", 1000) // hangs for delay
		require.NoError(t, err)
	})
	time.Sleep(10 * time.Millisecond)
	for range 2 { // one queued behind it, one after SharedStall has passed
		start := time.Now()
		ok, err := n.RenewShared(context.Background(), lock, "t", 1000)
		require.NoError(t, err)
		require.False(t, ok)
		require.Less(t, time.Since(start), delay/2, "a renewal waited for the hung one")
	}
	wg.Wait()
}
