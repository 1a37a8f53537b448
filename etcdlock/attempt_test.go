package etcdlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/etcdlock"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/status"
)

// TestAttemptTimeout: an attempt that hangs ends after the request timeout and
// is tried again; a caller's deadline still ends a call whose attempt hangs,
// with context.DeadlineExceeded.
func TestAttemptTimeout(t *testing.T) {
	var mu sync.Mutex
	hangs := 0 // Txns still to hang
	hang := onUnary(methodTxn, func(ctx context.Context, invoke func() error) error {
		mu.Lock()
		h := hangs > 0
		if h {
			hangs--
		}
		mu.Unlock()
		if !h {
			return invoke()
		}
		<-ctx.Done() // as a blackholed connection: only the context ends it
		return status.FromContextError(ctx.Err()).Err()
	})
	const timeout = 200 * time.Millisecond
	l := newLocker(t, newClientWith(t, []string{etcdSrv.Addr()}, hang), &etcdlock.Options{RequestTimeout: timeout})

	t.Run("retried", func(t *testing.T) {
		mu.Lock()
		hangs = 1
		mu.Unlock()
		start := time.Now()
		lease, err := l.TryLock(ctxFor(t, 10*time.Second), "attempt-timeout-"+driver.NewToken(), 10*time.Second)
		require.NoError(t, err)
		require.GreaterOrEqual(t, time.Since(start), timeout, "the first attempt hung until the request timeout")
		require.NoError(t, l.Unlock(context.Background(), lease))
	})
	t.Run("caller deadline", func(t *testing.T) {
		mu.Lock()
		hangs = 1 << 30
		mu.Unlock()
		defer func() {
			mu.Lock()
			hangs = 0
			mu.Unlock()
		}()
		long := newLocker(t, newClientWith(t, []string{etcdSrv.Addr()}, hang), &etcdlock.Options{RequestTimeout: time.Minute})
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := long.TryLock(ctx, "attempt-deadline-"+driver.NewToken(), 10*time.Second)
		require.Error(t, err)
		require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
		require.Less(t, time.Since(start), 5*time.Second, "the caller's deadline ended the hanging attempt")
	})
}
