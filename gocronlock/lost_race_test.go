package gocronlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/gocronlock"
	"github.com/distlock/distlock/memlock"
)

// TestOnLostBeforeQuickUnlock: a job that returns as soon as its Context ends with
// the loss, and so is unlocked at once, still gets its OnLost call: the Unlock
// must not stop the call that the loss triggered but has not started yet.
func TestOnLostBeforeQuickUnlock(t *testing.T) {
	m := memlock.New()
	var calls atomic.Int64
	lk, err := gocronlock.NewLocker(m, &gocronlock.Options{TTL: time.Minute, MinHold: time.Nanosecond,
		OnLost: func(string, error) { calls.Add(1) }})
	require.NoError(t, err)
	defer lk.Close()
	const n = 2000
	for i := range n {
		l, err := lk.Lock(t.Context(), "k")
		require.NoError(t, err)
		ctx := lk.Context(t.Context(), "k")
		go m.Revoke("k")
		<-ctx.Done()
		_ = l.Unlock(context.Background())
		require.Equal(t, int64(i+1), calls.Load(), "run %d: OnLost not called", i)
	}
}
