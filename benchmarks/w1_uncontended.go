package benchmarks

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// RunW1Rounds runs W1 with g goroutines for each of subjects, which take turns
// for cfg.W1Rounds rounds, each round with its share of cfg.W1Ops and cfg.W1Time;
// it returns one merged Result per subject (mergeW1). keyPrefix(i) is the key
// prefix of subjects[i].
func RunW1Rounds(ctx context.Context, subjects []Subject, cfg Config, g int, keyPrefix func(i int) string) []Result {
	rc := cfg
	rc.W1Ops, rc.W1Time = cfg.W1Ops/cfg.W1Rounds, cfg.W1Time/time.Duration(cfg.W1Rounds)
	parts := make([][]Result, len(subjects))
	for range cfg.W1Rounds {
		for i, s := range subjects {
			if n := len(parts[i]); n > 0 && parts[i][n-1].Err != "" {
				continue // a failing subject fails once
			}
			parts[i] = append(parts[i], RunW1(ctx, s, rc, g, keyPrefix(i)))
		}
	}
	out := make([]Result, len(subjects))
	for i := range subjects {
		out[i] = mergeW1(parts[i])
	}
	return out
}

// RunW1 runs the uncontended workload with g goroutines sharing one Client, each on
// its own key (keyPrefix + its index).
func RunW1(ctx context.Context, s Subject, cfg Config, g int, keyPrefix string) (r Result) {
	r = newResult(s, W1, g)
	if !s.Runs(W1) || s.Unavailable != "" {
		return r
	}
	c, err := s.New(ctx, nil)
	if err != nil {
		r.Err = fmt.Sprintf("new client: %v", err)
		return r
	}
	defer func() {
		if err := closeClient(c); err != nil && r.Err == "" {
			r.Err = fmt.Sprintf("close: %v", err)
		}
	}()

	pair := func(key string) (time.Duration, error) {
		t0 := time.Now()
		h, err := c.TryLock(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("TryLock %q: %w", key, err)
		}
		if err := h.Unlock(ctx); err != nil {
			return 0, fmt.Errorf("Unlock %q: %w", key, err)
		}
		return time.Since(t0), nil
	}

	var (
		ferr     firstErr
		budget   atomic.Int64
		lat      = make([][]time.Duration, g)
		warmed   sync.WaitGroup
		finished sync.WaitGroup
		start    = make(chan struct{})
		deadline time.Time
	)
	budget.Store(int64(cfg.W1Ops))
	warmed.Add(g)
	finished.Add(g)
	for i := range g {
		key := fmt.Sprintf("%s%d", keyPrefix, i)
		go func() {
			defer finished.Done()
			for range cfg.W1Warmup {
				if _, err := pair(key); err != nil {
					ferr.set(err)
					break
				}
			}
			warmed.Done()
			<-start
			if ferr.get() != nil {
				return
			}
			ds := make([]time.Duration, 0, cfg.W1Ops/g+1)
			for budget.Add(-1) >= 0 && time.Now().Before(deadline) {
				d, err := pair(key)
				if err != nil {
					ferr.set(err)
					return
				}
				ds = append(ds, d)
			}
			lat[i] = ds
		}()
	}
	warmed.Wait()
	t0 := time.Now()
	deadline = t0.Add(cfg.W1Time)
	close(start)
	finished.Wait()
	r.Elapsed = time.Since(t0)

	var ds []time.Duration
	for _, l := range lat {
		ds = append(ds, l...)
	}
	r.N = len(ds)
	r.Rate = float64(r.N) / r.Elapsed.Seconds()
	r.fill(ds)
	r.samples = ds
	if err := ferr.get(); err != nil {
		r.Err = err.Error()
	}
	return r
}

// mergeW1 merges W1's rounds: merge's sums and percentiles, and Rate the median
// of the rounds' rates, with their lowest and highest as the spread. A round
// that a burst of other work on the machine slowed down (a round lasts a fraction
// of a second for a fast subject) then moves the cell's rate, and its ratios, no
// more than any other round does.
func mergeW1(parts []Result) Result {
	r := merge(parts)
	r.Rounds = len(parts)
	var rates []float64
	for _, p := range parts {
		if p.Err == "" && p.N > 0 {
			rates = append(rates, p.Rate)
		}
	}
	if len(rates) > 0 {
		r.RateLo, r.Rate, r.RateHi = spreadOf(rates)
	}
	return r
}

// spreadOf returns the lowest, the median (the mean of the middle two of an even
// count) and the highest of xs, which it sorts; xs must not be empty.
func spreadOf[T float64 | time.Duration](xs []T) (lo, median, hi T) {
	slices.Sort(xs)
	m := len(xs) / 2
	median = xs[m]
	if len(xs)%2 == 0 {
		median = (xs[m-1] + xs[m]) / 2
	}
	return xs[0], median, xs[len(xs)-1]
}

// merge combines the results of several runs of one cell (W1's and W2's rounds):
// counts and times add up, and the percentiles are those of all the samples.
func merge(parts []Result) Result {
	if len(parts) == 0 {
		return Result{}
	}
	r := parts[0]
	r.N, r.Elapsed, r.samples = 0, 0, nil
	var ds []time.Duration
	for _, p := range parts {
		r.N += p.N
		r.Elapsed += p.Elapsed
		ds = append(ds, p.samples...)
		if r.Err == "" && p.Err != "" {
			r.Err = p.Err
		}
	}
	if r.Elapsed > 0 {
		r.Rate = float64(r.N) / r.Elapsed.Seconds()
	}
	r.fill(ds)
	r.samples = ds
	return r
}
