package driver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errRetry = errors.New("retry me")

func retryable(err error) bool { return errors.Is(err, errRetry) }

// TestRetry: a statement that keeps failing with a retryable error is tried
// MaxAttempts times; another error ends the retries at once, and so does the end
// of the context.
func TestRetry(t *testing.T) {
	n := 0
	err := Retry(t.Context(), retryable, func() error { n++; return errRetry })
	require.ErrorIs(t, err, errRetry)
	require.Equal(t, MaxAttempts, n)

	n = 0
	other := errors.New("other")
	err = Retry(t.Context(), retryable, func() error { n++; return other })
	require.ErrorIs(t, err, other)
	require.Equal(t, 1, n)

	ctx, cancel := context.WithCancel(t.Context())
	n = 0
	err = Retry(ctx, retryable, func() error { n++; cancel(); return errRetry })
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, errRetry)
	require.Equal(t, 1, n)
}

// TestCalls: Close cancels the calls in flight with cause ErrClosed and waits for
// them and their goroutines; Begin fails after Close; a second Close waits for the
// first.
func TestCalls(t *testing.T) {
	g := NewCalls()
	cctx, end, err := g.Begin(t.Context())
	require.NoError(t, err)
	finished := make(chan struct{})
	g.Go(func() {
		<-cctx.Done()
		time.Sleep(50 * time.Millisecond) // work that Close must wait for
		close(finished)
	})
	go func() {
		<-cctx.Done()
		end()
	}()
	require.True(t, g.Close())
	select {
	case <-finished:
	default:
		t.Fatal("Close returned before the goroutine of a call")
	}
	require.ErrorIs(t, context.Cause(cctx), distlock.ErrClosed)
	require.ErrorIs(t, Err(cctx, context.Canceled), distlock.ErrClosed)
	require.ErrorIs(t, Err(cctx, context.Canceled), context.Canceled)
	_, _, err = g.Begin(t.Context())
	require.ErrorIs(t, err, distlock.ErrClosed)
	require.False(t, g.Close())
	require.NoError(t, Err(t.Context(), nil))
}
