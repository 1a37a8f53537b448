package driver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder is a send function that records its batches; a batch that contains
// "stuck" waits until its context ends, and, while block is set, every batch
// waits for it to be closed.
type recorder struct {
	mu      sync.Mutex
	batches [][]string
	block   chan struct{}
}

func (r *recorder) send(ctx context.Context, reqs []string) ([]string, error) {
	r.mu.Lock()
	r.batches = append(r.batches, slices.Clone(reqs))
	block := r.block
	r.mu.Unlock()
	if slices.Contains(reqs, "stuck") {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	res := make([]string, len(reqs))
	for i, q := range reqs {
		res[i] = "done " + q
	}
	return res, nil
}

func (r *recorder) sizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n []int
	for _, b := range r.batches {
		n = append(n, len(b))
	}
	return n
}

// TestBatcherBatches: a request that finds nothing in flight goes alone; those
// that come meanwhile go as one batch, each with its own result, split by
// MaxBatch and by Same (a second request of the same lease waits for a later
// batch).
func TestBatcherBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{block: make(chan struct{})}
		b := NewBatcher(r.send, BatchOptions[string]{MaxBatch: 3, Same: func(a, b string) bool { return a == b }})
		var wg sync.WaitGroup
		do := func(q string) {
			wg.Go(func() {
				res, err := b.Do(t.Context(), q)
				assert.NoError(t, err, q)
				assert.Equal(t, "done "+q, res)
			})
		}
		do("first")
		synctest.Wait()
		for _, q := range []string{"a", "b", "a", "c", "d"} {
			do(q)
			synctest.Wait() // in this order
		}
		require.Equal(t, 5, b.Queued())
		close(r.block)
		wg.Wait()
		require.Equal(t, []int{1, 3, 2}, r.sizes()) // first; a, b, c; a, d
	})
}

// TestBatcherOwnDeadlines: while sends stall, every caller returns at its own
// deadline exactly, whether it sent alone, is in a batch in flight (the batch's
// first caller, whose deadline is the earliest, included) or is queued; a queued
// caller's error says its request was never sent, an in-flight caller's does not.
func TestBatcherOwnDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{block: make(chan struct{})} // never closed: every send stalls
		b := NewBatcher(r.send, BatchOptions[string]{})
		deadline := func(i int) time.Duration {
			if i >= 20 { // they give up before the batch of 1-19 ends
				return time.Second + time.Duration(i-20)*10*time.Millisecond
			}
			return time.Second + time.Duration(i)*100*time.Millisecond
		}
		took := make([]time.Duration, 30)
		errs := make([]error, 30)
		var wg sync.WaitGroup
		do := func(i int) {
			wg.Go(func() {
				start := time.Now()
				ctx, cancel := context.WithTimeout(t.Context(), deadline(i))
				defer cancel()
				_, errs[i] = b.Do(ctx, fmt.Sprint(i))
				took[i] = time.Since(start)
			})
		}
		do(0) // alone: its send is in flight
		synctest.Wait()
		for i := 1; i < 20; i++ {
			do(i) // queued behind it
		}
		synctest.Wait()
		time.Sleep(deadline(0)) // 0 gives up; the batch of 1-19 is sent
		synctest.Wait()
		for i := 20; i < 30; i++ {
			do(i) // queued behind that batch, which never ends: never sent
		}
		wg.Wait()
		for i, d := range took {
			require.Equal(t, deadline(i), d, "call %d", i)
			require.ErrorIs(t, errs[i], context.DeadlineExceeded, "call %d", i)
			require.Equal(t, i >= 20, IsNotSent(errs[i]), "call %d: %v", i, errs[i])
		}
		require.Equal(t, []int{1, 19}, r.sizes())
	})
}

// TestBatcherStall: a send stuck for longer than Stall stops holding up the
// requests queued behind it: they go as a batch of their own at Stall.
func TestBatcherStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{}
		b := NewBatcher(r.send, BatchOptions[string]{Stall: 100 * time.Millisecond})
		start := time.Now()
		stuck := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err := b.Do(ctx, "stuck")
			stuck <- err
		}()
		synctest.Wait()
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Go(func() {
				_, err := b.Do(t.Context(), fmt.Sprint(i))
				assert.NoError(t, err)
				assert.Equal(t, 100*time.Millisecond, time.Since(start), "call %d behind the stuck one", i)
			})
		}
		wg.Wait()
		require.ErrorIs(t, <-stuck, context.DeadlineExceeded)
		require.Equal(t, []int{1, 10}, r.sizes())
	})
}

// TestBatcherMaxInFlight: up to MaxInFlight requests go alone at once; the next
// waits for one of them.
func TestBatcherMaxInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{block: make(chan struct{})}
		b := NewBatcher(r.send, BatchOptions[string]{MaxInFlight: 2})
		var wg sync.WaitGroup
		for _, q := range []string{"a", "b", "c", "d"} {
			wg.Go(func() { _, err := b.Do(t.Context(), q); assert.NoError(t, err) })
			synctest.Wait()
		}
		require.Equal(t, []int{1, 1}, r.sizes())
		require.Equal(t, 2, b.Queued())
		close(r.block)
		wg.Wait()
		require.Equal(t, []int{1, 1, 2}, r.sizes())
	})
}

// TestBatcherErrors: a send's error goes to every caller of its batch; a send
// that returns the wrong number of results is an error, not a panic.
func TestBatcherErrors(t *testing.T) {
	boom := errors.New("boom")
	b := NewBatcher(func(context.Context, []int) ([]int, error) { return nil, boom }, BatchOptions[int]{})
	_, err := b.Do(t.Context(), 1)
	require.ErrorIs(t, err, boom)
	short := NewBatcher(func(context.Context, []int) ([]int, error) { return nil, nil }, BatchOptions[int]{})
	_, err = short.Do(t.Context(), 1)
	require.ErrorIs(t, err, errBatchResults)
}

// TestBatcherSendIgnoresContext: a send that does not obey its context (a
// statement SQLite cannot interrupt) does not keep its caller past the caller's
// own deadline, also when the caller sent alone.
func TestBatcherSendIgnoresContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var wg sync.WaitGroup
		b := NewBatcher(func(context.Context, []int) ([]int, error) {
			<-release
			return []int{0}, nil
		}, BatchOptions[int]{Go: wg.Go})
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		_, err := b.Do(ctx, 1)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.False(t, IsNotSent(err), "it was sent")
		require.Equal(t, time.Second, time.Since(start))
		close(release)
		wg.Wait()
	})
}

// TestBatcherPause: the requests queued when a batch ends wait Pause(took) before
// they go, and those that come meanwhile join them.
func TestBatcherPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{}
		var tooks []time.Duration
		b := NewBatcher(func(ctx context.Context, reqs []string) ([]string, error) {
			time.Sleep(10 * time.Millisecond)
			return r.send(ctx, reqs)
		}, BatchOptions[string]{Pause: func(took time.Duration) time.Duration { tooks = append(tooks, took); return took / 2 }})
		var wg sync.WaitGroup
		do := func(q string) { wg.Go(func() { _, err := b.Do(t.Context(), q); assert.NoError(t, err) }) }
		start := time.Now()
		do("first")
		synctest.Wait()
		do("a")
		synctest.Wait()
		time.Sleep(12 * time.Millisecond) // the first batch ended at 10ms; "a" waits until 15ms
		do("b")
		wg.Wait()
		require.Equal(t, []int{1, 2}, r.sizes())
		require.Equal(t, 25*time.Millisecond, time.Since(start))
		require.Equal(t, []time.Duration{10 * time.Millisecond}, tooks) // no pause with nothing queued
	})
}

// TestBatcherInline: with Inline, a lone request is sent on its caller's
// goroutine (no goroutine is started), and the requests that come meanwhile still
// queue and go as one batch.
func TestBatcherInline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{block: make(chan struct{})}
		started := 0
		b := NewBatcher(r.send, BatchOptions[string]{Inline: true, Go: func(f func()) { started++; go f() }})
		var wg sync.WaitGroup
		for _, q := range []string{"alone", "a", "b"} {
			wg.Go(func() { _, err := b.Do(t.Context(), q); assert.NoError(t, err) })
			synctest.Wait()
		}
		require.Zero(t, started)
		close(r.block)
		wg.Wait()
		require.Equal(t, []int{1, 2}, r.sizes())
		require.Equal(t, 1, started)
	})
}
