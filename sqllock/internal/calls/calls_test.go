package calls

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

// TestGroup: Close cancels the calls in flight with cause ErrClosed and waits for
// them and their goroutines; Begin fails after Close; a second Close waits for the
// first.
func TestGroup(t *testing.T) {
	g := New()
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

func TestMicros(t *testing.T) {
	require.EqualValues(t, 1, Micros(time.Nanosecond))
	require.EqualValues(t, 1000, Micros(time.Millisecond))
	require.EqualValues(t, 1001, Micros(time.Millisecond+time.Nanosecond))
}

func TestBatch(t *testing.T) {
	same := func(a, b int) bool { return a%10 == b%10 }
	batch, rest := Batch([]int{1, 2, 11, 3, 4, 5}, 3, same)
	require.Equal(t, []int{1, 2, 3}, batch, "at most 3, and 11 is the same as 1")
	require.Equal(t, []int{11, 4, 5}, rest)
}
