package benchmarks

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// RunW2Rounds runs W2 for each of subjects, which take turns for cfg.W2Rounds
// rounds, each round with its share of cfg.W2Acquisitions and cfg.W2Time, on a
// key of its own (key(i) + the round); it returns one merged Result per subject,
// whose P50 is the median of the rounds' p50s and P50Lo, P50Hi their spread.
func RunW2Rounds(ctx context.Context, subjects []Subject, cfg Config, key func(i int) string) []Result {
	n := cfg.w2Rounds()
	rc := cfg
	rc.W2Acquisitions, rc.W2Time = max(cfg.W2Acquisitions/n, 1), cfg.W2Time/time.Duration(n)
	parts := make([][]Result, len(subjects))
	for round := range n {
		for i, s := range subjects {
			if k := len(parts[i]); k > 0 && parts[i][k-1].Err != "" {
				continue // a failing subject fails once
			}
			parts[i] = append(parts[i], RunW2(ctx, s, rc, fmt.Sprintf("%s-r%d", key(i), round)))
		}
	}
	out := make([]Result, len(subjects))
	for i := range subjects {
		out[i] = mergeRounds(parts[i])
	}
	return out
}

// mergeRounds merges W2's rounds: merge's sums and percentiles, the gaps and
// violations added up, and P50 the median of the rounds' p50s, with their lowest
// and highest as the spread.
func mergeRounds(parts []Result) Result {
	r := merge(parts)
	r.Gaps, r.Violations, r.Rounds = 0, 0, len(parts)
	var p50s []time.Duration
	for _, p := range parts {
		r.Gaps += p.Gaps
		r.Violations += p.Violations
		if p.Gaps > 0 {
			p50s = append(p50s, p.P50)
		}
	}
	if len(p50s) > 0 {
		r.P50Lo, r.P50, r.P50Hi = spreadOf(p50s)
	}
	return r
}

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
	r.samples = ds
	r.Violations = int(violations.Load())
	if err := ferr.get(); err != nil {
		r.Err = err.Error()
	}
	return r
}
