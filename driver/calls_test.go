package driver

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"testing/synctest"
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

type ctxKey struct{}

// TestCallsShared: a call whose context can never end runs on the shared closing
// context: its Done is Closing(), it keeps its context's values, contexts derived
// from it end with it (and watch it from no goroutine of their own), and Close
// ends it with cause ErrClosed, which Err reports. Close waits for the call's
// request in flight.
func TestCallsShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewCalls()
		bg, endBG, err := g.Begin(context.Background())
		require.NoError(t, err)
		require.Equal(t, g.Closing(), bg.Done())
		vctx, endV, err := g.Begin(context.WithValue(context.Background(), ctxKey{}, "v"))
		require.NoError(t, err)
		require.Equal(t, g.Closing(), vctx.Done())
		require.Equal(t, "v", vctx.Value(ctxKey{}))
		n := runtime.NumGoroutine()
		derived, cancel := context.WithTimeout(vctx, time.Hour)
		defer cancel()
		require.Equal(t, n, runtime.NumGoroutine(), "a derived context watches the closing context from a goroutine")
		require.NoError(t, bg.Err())

		ended := make(chan struct{})
		for _, c := range []struct {
			ctx context.Context
			end func()
		}{{bg, endBG}, {vctx, endV}} {
			go func() {
				<-c.ctx.Done()
				time.Sleep(time.Second) // the request in flight, which Close waits for
				c.end()
				ended <- struct{}{}
			}()
		}
		start := time.Now()
		require.True(t, g.Close())
		require.Equal(t, time.Second, time.Since(start))
		<-ended
		<-ended
		for _, ctx := range []context.Context{bg, vctx, derived} {
			require.ErrorIs(t, ctx.Err(), context.Canceled)
			require.ErrorIs(t, context.Cause(ctx), distlock.ErrClosed)
			require.ErrorIs(t, Err(ctx, ctx.Err()), distlock.ErrClosed)
		}
		_, _, err = g.Begin(context.Background())
		require.ErrorIs(t, err, distlock.ErrClosed)
	})
}

// BenchmarkBegin measures a call's Begin and end: with a context that can never
// end (the shared closing context) and with one that can (a context of its own).
func BenchmarkBegin(b *testing.B) {
	g := NewCalls()
	defer g.Close()
	cancellable, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"background", context.Background()}, {"values", context.WithValue(context.Background(), ctxKey{}, 1)}, {"cancellable", cancellable}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_, end, err := g.Begin(c.ctx)
					if err != nil {
						b.Fatal(err)
					}
					end()
				}
			})
		})
	}
}
