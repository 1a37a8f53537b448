package distlock_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/memlock"
)

// events collects what an Observer sees.
type events struct {
	mu  sync.Mutex
	all []distlock.Event
}

func (e *events) observer() distlock.Observer {
	return distlock.Observer{OnEvent: func(_ context.Context, ev distlock.Event) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.all = append(e.all, ev)
	}}
}

func (e *events) ops() []distlock.Op {
	e.mu.Lock()
	defer e.mu.Unlock()
	var ops []distlock.Op
	for _, ev := range e.all {
		ops = append(ops, ev.Op)
	}
	return ops
}

func (e *events) get() []distlock.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]distlock.Event(nil), e.all...)
}

func TestObserverSeesDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memlock.New()
		var seen events
		opts := &distlock.DoOptions{TTL: 300 * time.Millisecond, Observer: seen.observer()}
		var fence uint64
		err := distlock.Do(t.Context(), l, "job", opts, func(ctx context.Context) error {
			time.Sleep(250 * time.Millisecond) // renewals at 100ms and 200ms
			return nil
		})
		require.NoError(t, err)
		want := []distlock.Op{distlock.OpAttempt, distlock.OpAcquire, distlock.OpHold, distlock.OpRenew, distlock.OpRenew, distlock.OpRelease}
		require.Equal(t, want, seen.ops())
		for _, ev := range seen.get() {
			require.Equal(t, "job", ev.Key, ev.Op)
			require.NoError(t, ev.Err, ev.Op)
			if fence == 0 {
				fence = ev.Fence
			}
			require.Equal(t, fence, ev.Fence, ev.Op)
		}
		require.NotZero(t, fence)
	})
}

// With Wait, Do's Observer sees the acquisition made by Lock, and Took is the wait.
func TestObserverSeesTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memlock.New()
		held, err := l.TryLock(t.Context(), "job", time.Hour)
		require.NoError(t, err)
		var seen events
		done := make(chan error, 1)
		go func() {
			done <- distlock.Do(t.Context(), l, "job", &distlock.DoOptions{Wait: true, Observer: seen.observer()}, func(context.Context) error { return nil })
		}()
		time.Sleep(200 * time.Millisecond)
		require.NoError(t, l.Unlock(t.Context(), held))
		require.NoError(t, <-done)
		evs := seen.get()
		// Lock's attempts and waits, then the acquisition: contention, one Wait that
		// the Unlock ended, the attempt that won.
		require.GreaterOrEqual(t, len(evs), 4)
		require.Equal(t, []distlock.Op{distlock.OpAttempt, distlock.OpWait, distlock.OpAttempt, distlock.OpAcquire}, opsOf(evs[:4]))
		require.ErrorIs(t, evs[0].Err, distlock.ErrLocked)
		require.Equal(t, 1, evs[0].Attempt)
		require.Equal(t, 200*time.Millisecond, evs[1].Took)
		require.NoError(t, evs[2].Err)
		require.Equal(t, 2, evs[3].Attempt)
		require.NotZero(t, evs[3].Fence)
		require.Equal(t, 200*time.Millisecond, evs[3].Took)
	})
}

func TestObserverSeesFailedRenewalsAndTheLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &spy{Locker: memlock.New()}
		lease, err := s.TryLock(t.Context(), "job", 300*time.Millisecond)
		require.NoError(t, err)
		s.failRenew.Store(true)
		var seen events
		var log bytes.Buffer
		obs := seen.observer()
		obs.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
		h := distlock.Hold(t.Context(), s, lease, &distlock.HoldOptions{TTL: 300 * time.Millisecond, Observer: obs})
		<-h.Context().Done()
		require.ErrorIs(t, h.Release(t.Context()), distlock.ErrNotHeld)

		evs := seen.get()
		require.GreaterOrEqual(t, len(evs), 3)
		require.Equal(t, distlock.OpHold, evs[0].Op)
		last := evs[len(evs)-1]
		require.Equal(t, distlock.OpLost, last.Op)
		require.ErrorIs(t, last.Err, distlock.ErrNotHeld)
		for _, ev := range evs[1 : len(evs)-1] {
			require.Equal(t, distlock.OpRenew, ev.Op)
			require.ErrorIs(t, ev.Err, errTransport)
		}
		// The Logger: Warn for a failed renewal, Error for the loss.
		lines := strings.Split(strings.TrimSpace(log.String()), "\n")
		require.Len(t, lines, len(evs))
		require.Contains(t, lines[0], `level=DEBUG msg="distlock hold" key=job`)
		require.Contains(t, lines[1], `level=WARN msg="distlock renew" key=job`)
		require.Contains(t, lines[len(lines)-1], `level=ERROR msg="distlock lost" key=job`)
	})
}

func TestObserverLogsSuccessAtDebug(t *testing.T) {
	var log bytes.Buffer
	obs := distlock.Observer{Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	err := distlock.Do(t.Context(), memlock.New(), "job", &distlock.DoOptions{Observer: obs}, func(context.Context) error { return nil })
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	require.Len(t, lines, 4)
	require.Contains(t, lines[0], `level=DEBUG msg="distlock attempt" key=job`)
	require.Contains(t, lines[1], `level=DEBUG msg="distlock acquire" key=job`)
	require.Contains(t, lines[1], `fence=1 attempt=1`)
	require.Contains(t, lines[2], `level=DEBUG msg="distlock hold" key=job`)
	require.Contains(t, lines[3], `level=DEBUG msg="distlock release" key=job`)
}

func opsOf(evs []distlock.Event) []distlock.Op {
	var ops []distlock.Op
	for _, ev := range evs {
		ops = append(ops, ev.Op)
	}
	return ops
}

// Contention is Debug, a failed attempt Warn; Lock's giving up is an OpAcquire with
// the error; events carry the caller's context.
func TestObserverSeesContentionAndFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memlock.New()
		_, err := l.TryLock(t.Context(), "job", time.Hour)
		require.NoError(t, err)
		type ctxKey struct{}
		ctx, cancel := context.WithTimeout(context.WithValue(t.Context(), ctxKey{}, "caller"), 50*time.Millisecond)
		defer cancel()
		var seen events
		var ctxs []any
		obs := distlock.Observer{OnEvent: func(ctx context.Context, ev distlock.Event) {
			ctxs = append(ctxs, ctx.Value(ctxKey{}))
			seen.observer().OnEvent(ctx, ev)
		}}
		_, err = distlock.Lock(ctx, l, "job", time.Second, &distlock.LockOptions{Observer: obs})
		require.ErrorIs(t, err, distlock.ErrLocked)
		evs := seen.get()
		last := evs[len(evs)-1]
		require.Equal(t, distlock.OpAcquire, last.Op)
		require.ErrorIs(t, last.Err, distlock.ErrLocked)
		require.ErrorIs(t, last.Err, context.DeadlineExceeded)
		require.Equal(t, 50*time.Millisecond, last.Took)
		require.Equal(t, distlock.OpAttempt, evs[0].Op)
		for _, c := range ctxs {
			require.Equal(t, "caller", c, "events carry the caller's context")
		}

		var log bytes.Buffer
		logged := distlock.Observer{Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))}
		f := &spy{Locker: memlock.New()}
		f.failTry.Store(1)
		_, err = distlock.Lock(t.Context(), f, "other", time.Second, &distlock.LockOptions{Observer: logged})
		require.NoError(t, err)
		require.Contains(t, log.String(), `level=WARN msg="distlock attempt" key=other`)
		require.Contains(t, log.String(), `level=DEBUG msg="distlock acquire" key=other`)
	})
}
