package driver

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/distlock/distlock"
)

// Calls tracks the calls in flight of a Locker and the goroutines they started, so
// that Close can end them and wait for them: the one call lifecycle of every
// Locker. The zero value is not usable; call NewCalls.
type Calls struct {
	wg     sync.WaitGroup // calls in flight and their goroutines
	closed chan struct{}  // closed when the first Close has finished
	// closing is the context of the calls whose own context cannot end: Close
	// cancels it, with cause distlock.ErrClosed, when it starts.
	closing       context.Context
	cancelClosing context.CancelCauseFunc
	endShared     func() // the end of a call on closing

	mu       sync.Mutex
	shut     bool                               // Close was called; guards wg.Add
	inFlight map[uint64]context.CancelCauseFunc // the other calls in flight, by id
	nextID   uint64
}

// NewCalls returns a Calls that is open.
func NewCalls() *Calls {
	g := &Calls{closed: make(chan struct{}), inFlight: make(map[uint64]context.CancelCauseFunc)}
	g.closing, g.cancelClosing = context.WithCancelCause(context.Background())
	g.endShared = g.wg.Done
	return g
}

// Begin starts a call. It returns the context for the call's requests, which Close
// cancels with cause distlock.ErrClosed, and the function that ends the call; or
// distlock.ErrClosed after Close.
//
// When ctx can never end (its Done is nil, as context.Background's), the returned
// context's Done is Closing(), shared by every such call, and it carries ctx's
// values: a Driver that sees ctx.Done() == Closing() knows that only Close can end
// the call, and may run its request on the caller's goroutine. Such a call costs no
// context of its own.
func (g *Calls) Begin(ctx context.Context) (context.Context, func(), error) {
	if ctx.Done() == nil {
		return g.beginShared(ctx)
	}
	cctx, cancel := context.WithCancelCause(ctx)
	g.mu.Lock()
	if g.shut {
		g.mu.Unlock()
		cancel(nil)
		return nil, nil, distlock.ErrClosed
	}
	g.wg.Add(1)
	id := g.nextID
	g.nextID++
	g.inFlight[id] = cancel
	g.mu.Unlock()
	return cctx, func() {
		g.mu.Lock()
		delete(g.inFlight, id)
		g.mu.Unlock()
		cancel(nil)
		g.wg.Done()
	}, nil
}

// beginShared is Begin for a ctx that can never end: the call runs on the shared
// closing context (with ctx's values, unless ctx is an empty context).
func (g *Calls) beginShared(ctx context.Context) (context.Context, func(), error) {
	g.mu.Lock()
	if g.shut {
		g.mu.Unlock()
		return nil, nil, distlock.ErrClosed
	}
	g.wg.Add(1)
	g.mu.Unlock()
	if ctx == context.Background() || ctx == context.TODO() {
		return g.closing, g.endShared, nil
	}
	return closingValues{Context: g.closing, values: ctx}, g.endShared, nil
}

// Closing returns the channel that Close closes when it starts: the Done of the
// contexts that Begin returns for calls whose own context can never end.
func (g *Calls) Closing() <-chan struct{} { return g.closing.Done() }

// closingValues is the context of a call on the shared closing context whose own
// context has values: Done, Err and cause are the closing context's, and a value
// is ctx's unless the closing context has it (only the context package's own key,
// which lets contexts derived from this one register with the closing context
// instead of watching it from a goroutine of their own).
type closingValues struct {
	context.Context // the closing context
	values          context.Context
}

func (c closingValues) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.values.Value(key)
}

// Go runs f in a goroutine that Close waits for. It must be called during a call
// (between Begin and its end), so that Close has not started to wait.
func (g *Calls) Go(f func()) {
	g.wg.Go(f)
}

// Close makes every later Begin fail with distlock.ErrClosed, cancels the contexts
// of the calls in flight (and closes Closing()), and waits until they and the
// goroutines they started have returned. It reports whether it was the first
// Close; a later one waits for the first and returns false.
func (g *Calls) Close() bool {
	g.mu.Lock()
	if g.shut {
		g.mu.Unlock()
		<-g.closed
		return false
	}
	g.shut = true
	g.cancelClosing(distlock.ErrClosed)
	for _, cancel := range g.inFlight {
		cancel(distlock.ErrClosed)
	}
	g.mu.Unlock()
	g.wg.Wait()
	close(g.closed)
	return true
}

// Err returns err, the error of a call whose requests ran with cctx (from Begin),
// wrapped with distlock.ErrClosed when Close cancelled cctx: the call failed because
// its Locker was closed.
func Err(cctx context.Context, err error) error {
	if err != nil && !errors.Is(err, distlock.ErrClosed) && errors.Is(context.Cause(cctx), distlock.ErrClosed) {
		return fmt.Errorf("%w while the call was in flight (%w)", distlock.ErrClosed, err)
	}
	return err
}

// The one retry schedule: MaxAttempts attempts, the first pause RetryBackoff, each
// pause a full-jitter draw below a bound that doubles.
const (
	MaxAttempts  = 5
	RetryBackoff = 5 * time.Millisecond
)

// Retry runs op until it succeeds, fails with an error that retryable rejects, ctx
// ends, or MaxAttempts attempts were made, pausing by Pause between attempts. It
// returns op's last error (joined with ctx.Err() when ctx ended).
func Retry(ctx context.Context, retryable func(error) bool, op func() error) error {
	for attempt := 1; ; attempt++ {
		err := op()
		if err == nil || attempt >= MaxAttempts || !retryable(err) {
			return err
		}
		if perr := Pause(ctx, attempt, time.Duration(1<<62)); perr != nil {
			return errors.Join(err, perr)
		}
	}
}

// Pause sleeps before attempt+1 of a retried request: a full-jitter draw below
// RetryBackoff doubled attempt-1 times, capped at max. It returns ctx.Err() if ctx
// ends first.
func Pause(ctx context.Context, attempt int, max time.Duration) error {
	bound := RetryBackoff << min(attempt-1, 20)
	bound = min(bound, max)
	t := time.NewTimer(rand.N(bound) + 1)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
