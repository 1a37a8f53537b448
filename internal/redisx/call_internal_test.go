package redisx

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// withGroup runs test with an open Group, which it then closes and waits for.
func withGroup(t *testing.T, test func(t *testing.T, g *Group)) {
	g := NewGroup()
	require.NoError(t, g.Enter())
	test(t, g)
	g.Leave()
	g.Close()
	g.Wait()
}

// TestCallCancelled: Call returns ctx's error as soon as ctx is done while f still
// runs, and f runs to its end (g's Wait waits for it).
func TestCallCancelled(t *testing.T) {
	withGroup(t, func(t *testing.T, g *Group) {
		release := make(chan struct{})
		late := make(chan int, 1)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(10*time.Millisecond, cancel)
		start := time.Now()
		v, err := Call(ctx, g, func() (int, error) { <-release; late <- 7; return 7, nil })
		require.ErrorIs(t, err, context.Canceled)
		require.Zero(t, v)
		require.Less(t, time.Since(start), 5*time.Second)
		close(release)
		select {
		case v := <-late:
			require.Equal(t, 7, v)
		case <-time.After(10 * time.Second):
			t.Fatal("f did not run to its end")
		}
	})
}

// TestCallOwnResult: calls cancelled at random moments, from many goroutines, get
// their own result or their context's error, never another call's result (the
// workers they leave behind are reused).
func TestCallOwnResult(t *testing.T) {
	withGroup(t, func(t *testing.T, g *Group) {
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := range 300 {
					want := w*1000 + i
					ctx, cancel := context.WithCancel(context.Background())
					d := time.Duration(rand.IntN(200)) * time.Microsecond
					time.AfterFunc(d, cancel)
					v, err := Call(ctx, g, func() (int, error) {
						time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
						return want, nil
					})
					if err != nil {
						if !errors.Is(err, context.Canceled) {
							t.Errorf("call %d: %v", want, err)
						}
					} else if v != want {
						t.Errorf("call %d got %d", want, v)
					}
					cancel()
				}
			})
		}
		wg.Wait()
	})
}

// TestCloseEndsIdleWorkers: Close ends the idle workers at once, not after
// workerIdle.
func TestCloseEndsIdleWorkers(t *testing.T) {
	old := workerIdle
	workerIdle = time.Hour
	t.Cleanup(func() { workerIdle = old })
	g := NewGroup()
	require.NoError(t, g.Enter())
	ctx, cancel := context.WithCancel(context.Background())
	for range 3 {
		_, err := Call(ctx, g, func() (int, error) { return 1, nil })
		require.NoError(t, err)
	}
	cancel()
	g.Leave()
	g.Close()
	done := make(chan struct{})
	go func() { g.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after Close")
	}
}
