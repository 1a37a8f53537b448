package benchmarks

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// RunW2 runs the contended handoff: cfg.W2Waiters Clients take turns on key, each
// holding it cfg.W2Hold.
func RunW2(ctx context.Context, s Subject, cfg Config, key string) (r Result) {
	n := cfg.W2Waiters
	r = newResult(s, W2, n)
	if !s.Runs(W2) || s.Unavailable != "" {
		return r
	}
	clients := make([]Client, 0, n)
	defer func() {
		for _, c := range clients {
			if err := closeClient(c); err != nil && r.Err == "" {
				r.Err = fmt.Sprintf("close: %v", err)
			}
		}
	}()
	for range n {
		c, err := s.New(ctx, nil)
		if err != nil {
			r.Err = fmt.Sprintf("new client: %v", err)
			return r
		}
		clients = append(clients, c)
	}

	epoch := time.Now() // the one monotonic clock of every timestamp below
	since := func() time.Duration { return time.Since(epoch) }
	var (
		ferr       firstErr
		lastUnlock atomic.Int64 // since(epoch) when the last holder called Unlock; -1: none yet
		holders    atomic.Int32
		violations atomic.Int32
		acquired   atomic.Int64
		stopped    atomic.Bool
		stopOnce   sync.Once
		stopAt     time.Duration
		turnMu     sync.Mutex
		turn       = sync.NewCond(&turnMu)
		seq        int64 // acquisitions so far, measured or not (under turnMu)
		gaps       = make([][]time.Duration, n)
		ready      sync.WaitGroup
		done       sync.WaitGroup
		start      = make(chan struct{})
	)
	lastUnlock.Store(-1)
	lockCtx, cancelLocks := context.WithCancel(ctx)
	defer cancelLocks()
	stop := func() {
		stopOnce.Do(func() {
			stopAt = since()
			stopped.Store(true)
			cancelLocks()
			turnMu.Lock()
			turn.Broadcast()
			turnMu.Unlock()
		})
	}

	ready.Add(n)
	done.Add(n)
	for i, c := range clients {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			for !stopped.Load() {
				h, err := c.Lock(lockCtx, key)
				if err != nil {
					if !stopped.Load() {
						ferr.set(fmt.Errorf("Lock: %w", err))
						stop()
					}
					return
				}
				at := since()
				if holders.Add(1) != 1 {
					violations.Add(1)
				}
				turnMu.Lock()
				seq++
				mine := seq
				turn.Broadcast()
				turnMu.Unlock()
				if !stopped.Load() {
					if prev := lastUnlock.Load(); prev >= 0 {
						gaps[i] = append(gaps[i], at-time.Duration(prev))
					}
					if acquired.Add(1) >= int64(cfg.W2Acquisitions) {
						stop()
					}
					time.Sleep(cfg.W2Hold) // the critical section
				}
				holders.Add(-1)
				lastUnlock.Store(int64(since()))
				if err := unlock(ctx, h); err != nil {
					ferr.set(fmt.Errorf("Unlock: %w", err))
					stop()
					return
				}
				// Queue up again only once another waiter has taken the key, so that
				// every acquisition is a handoff (a releaser that asked again at
				// once could win its own release back).
				turnMu.Lock()
				for seq == mine && !stopped.Load() {
					turn.Wait()
				}
				turnMu.Unlock()
			}
		}()
	}
	ready.Wait()
	t0 := since()
	timer := time.AfterFunc(cfg.W2Time, stop)
	close(start)
	finished := make(chan struct{})
	go func() {
		done.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-ctx.Done():
		ferr.set(fmt.Errorf("waiters did not stop: %w", ctx.Err()))
		stop()
		<-finished
	}
	timer.Stop()
	stop()

	r.Elapsed = stopAt - t0
	r.N = int(min(acquired.Load(), int64(cfg.W2Acquisitions)))
	r.Rate = float64(r.N) / r.Elapsed.Seconds()
	var ds []time.Duration
	for _, g := range gaps {
		ds = append(ds, g...)
	}
	r.Gaps = len(ds)
	r.fill(ds)
	r.Violations = int(violations.Load())
	if err := ferr.get(); err != nil {
		r.Err = err.Error()
	}
	return r
}
