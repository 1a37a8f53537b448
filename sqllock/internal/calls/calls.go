// Package calls runs the calls of the sqllock Lockers: the lifecycle that Close
// ends (Group), the retries of statements that the database rolled back (Retry), and
// the conversion of a ttl to the databases' units (Micros), and the split of a
// queue of operations into the next batch (Batch).
package calls

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/distlock/distlock"
)

// A Group tracks the calls in flight of a Locker and the goroutines they started,
// so that Close can end them and wait for them. The zero value is not usable; call
// New.
type Group struct {
	closing context.Context // cancelled by Close, with cause distlock.ErrClosed
	stop    context.CancelCauseFunc
	wg      sync.WaitGroup // calls in flight and their goroutines
	closed  chan struct{}  // closed when the first Close has finished

	mu   sync.Mutex
	shut bool // Close was called; guards wg.Add
}

// New returns a Group that is open.
func New() *Group {
	closing, stop := context.WithCancelCause(context.Background())
	return &Group{closing: closing, stop: stop, closed: make(chan struct{})}
}

// Begin starts a call. It returns the context for the call's statements, which
// Close cancels with cause distlock.ErrClosed, and the function that ends the call;
// or distlock.ErrClosed after Close.
func (g *Group) Begin(ctx context.Context) (context.Context, func(), error) {
	g.mu.Lock()
	if g.shut {
		g.mu.Unlock()
		return nil, nil, distlock.ErrClosed
	}
	g.wg.Add(1)
	g.mu.Unlock()
	cctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(g.closing, func() { cancel(distlock.ErrClosed) })
	return cctx, func() {
		stop()
		cancel(nil)
		g.wg.Done()
	}, nil
}

// Go runs f in a goroutine that Close waits for. It must be called during a call
// (between Begin and its end), so that Close has not started to wait.
func (g *Group) Go(f func()) {
	g.wg.Go(f)
}

// Close makes every later Begin fail with distlock.ErrClosed, cancels the contexts
// of the calls in flight, and waits until they and the goroutines they started have
// returned. It reports whether it was the first Close; a later one waits for the
// first and returns false.
func (g *Group) Close() bool {
	g.mu.Lock()
	if g.shut {
		g.mu.Unlock()
		<-g.closed
		return false
	}
	g.shut = true
	g.mu.Unlock()
	g.stop(distlock.ErrClosed)
	g.wg.Wait()
	close(g.closed)
	return true
}

// Err returns err, the error of a call whose statements ran with cctx (from Begin),
// wrapped with distlock.ErrClosed when Close cancelled cctx: the call failed because
// its Locker was closed.
func Err(cctx context.Context, err error) error {
	if err != nil && !errors.Is(err, distlock.ErrClosed) && errors.Is(context.Cause(cctx), distlock.ErrClosed) {
		return fmt.Errorf("%w while the call was in flight (%w)", distlock.ErrClosed, err)
	}
	return err
}

// Retries of statements that the database rolled back because of a serialization
// failure, a deadlock or (SQLite) a busy database.
const (
	MaxAttempts  = 5
	RetryBackoff = 5 * time.Millisecond // the first sleep; it doubles, with full jitter
)

// Retry runs op until it succeeds, fails with an error that retryable rejects, ctx
// ends, or MaxAttempts attempts were made, sleeping a short jittered backoff between
// attempts. It returns op's last error (joined with ctx.Err() when ctx ended).
func Retry(ctx context.Context, retryable func(error) bool, op func() error) error {
	sleep := RetryBackoff
	for attempt := 1; ; attempt++ {
		err := op()
		if err == nil || attempt >= MaxAttempts || !retryable(err) {
			return err
		}
		t := time.NewTimer(rand.N(sleep) + 1)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		}
		sleep *= 2
	}
}

// Micros returns d in whole microseconds, rounded up, so that a row never expires
// before the lease's local Expires.
func Micros(d time.Duration) int64 {
	us := d / time.Microsecond
	if d%time.Microsecond != 0 {
		us++
	}
	return int64(us)
}

// Batch splits queue into the next batch (in queue order, at most max, no two
// that same says are one: two operations on one lease) and the rest, which
// wait for a later batch.
func Batch[T any](queue []T, max int, same func(a, b T) bool) (batch, rest []T) {
	for _, o := range queue {
		if len(batch) < max && !slices.ContainsFunc(batch, func(p T) bool { return same(p, o) }) {
			batch = append(batch, o)
		} else {
			rest = append(rest, o)
		}
	}
	return batch, rest
}
