package redislock

import (
	"context"
	"sync/atomic"
)

// call runs f and returns its result, or returns ctx.Err() as soon as ctx is done,
// whichever comes first.
//
// go-redis does not interrupt a command that is waiting for its reply when the
// context is cancelled (and, unless the client sets ContextTimeoutEnabled, it ignores
// the context's deadline too: it waits for ReadTimeout). So when ctx can be cancelled,
// f runs on its own goroutine and call waits for it or for ctx. If ctx wins, f keeps
// running until the client's own timeouts end it, and its late result is handed to
// abandon (when non-nil) on that goroutine; abandon must be bounded too. When ctx can
// never be done (context.Background), f runs on the caller's goroutine.
func call[T any](ctx context.Context, f func() (T, error), abandon func(T, error)) (T, error) {
	if ctx.Done() == nil {
		return f()
	}
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	const (
		pending = iota
		delivered
		abandoned
	)
	var state atomic.Int32
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		if state.CompareAndSwap(pending, delivered) {
			ch <- result{v, err}
			return
		}
		if abandon != nil {
			abandon(v, err)
		}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		if state.CompareAndSwap(pending, abandoned) {
			var zero T
			return zero, ctx.Err()
		}
		// f finished just now: its result is on its way and is better than none.
		r := <-ch
		return r.v, r.err
	}
}
