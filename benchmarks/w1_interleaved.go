package benchmarks

import (
	"context"
	"fmt"
	"time"
)

// RunW1Interleaved runs W1 with one goroutine for subjects pair by pair: each
// subject has its own client and key, all open at once, and one goroutine runs one
// TryLock+Unlock pair on each subject in turn (the order rotates by one every
// turn), for up to cfg.W1Ops pairs per subject, or cfg.W1Time per subject in all.
// Neighbouring pairs of two subjects are a fraction of a millisecond apart, so a
// change in the machine's load hits both alike: the ratios of the cells are much
// steadier than those of rounds a fraction of a second apart (RunW1Rounds), where
// one subject's round can fall into a burst of other work and the other's not.
// A subject's rate is its pairs over the sum of their times; the turns are split
// into cfg.W1Rounds blocks, and Rate is the median of the blocks' rates, RateLo
// and RateHi their lowest and highest. A subject that fails stops there, the
// others go on. keyPrefix(i) is the key prefix of subjects[i].
func RunW1Interleaved(ctx context.Context, subjects []Subject, cfg Config, keyPrefix func(i int) string) []Result {
	out := make([]Result, len(subjects))
	clients := make([]Client, len(subjects))
	keys := make([]string, len(subjects))
	live := 0
	for i, s := range subjects {
		out[i] = newResult(s, W1, 1)
		if !s.Runs(W1) || s.Unavailable != "" {
			continue
		}
		c, err := s.New(ctx, nil)
		if err != nil {
			out[i].Err = fmt.Sprintf("new client: %v", err)
			continue
		}
		clients[i], keys[i] = c, keyPrefix(i)+"0"
		live++
	}
	defer func() {
		for i, c := range clients {
			if c == nil {
				continue
			}
			if err := closeClient(c); err != nil && out[i].Err == "" {
				out[i].Err = fmt.Sprintf("close: %v", err)
			}
		}
	}()
	pair := func(i int) (time.Duration, error) {
		t0 := time.Now()
		h, err := clients[i].TryLock(ctx, keys[i])
		if err != nil {
			return 0, fmt.Errorf("TryLock %q: %w", keys[i], err)
		}
		if err := h.Unlock(ctx); err != nil {
			return 0, fmt.Errorf("Unlock %q: %w", keys[i], err)
		}
		return time.Since(t0), nil
	}
	fail := func(i int, err error) {
		out[i].Err = err.Error()
		live--
	}
	for range cfg.W1Warmup {
		for i, c := range clients {
			if c == nil || out[i].Err != "" {
				continue
			}
			if _, err := pair(i); err != nil {
				fail(i, err)
			}
		}
	}
	samples := make([][]time.Duration, len(subjects))
	deadline := time.Now().Add(time.Duration(live) * cfg.W1Time)
	for turn := 0; turn < cfg.W1Ops && live > 0 && time.Now().Before(deadline); turn++ {
		for j := range subjects {
			i := (turn + j) % len(subjects)
			if clients[i] == nil || out[i].Err != "" {
				continue
			}
			d, err := pair(i)
			if err != nil {
				fail(i, err)
				continue
			}
			samples[i] = append(samples[i], d)
		}
	}
	for i := range subjects {
		if clients[i] != nil && len(samples[i]) > 0 {
			w1FromPairs(&out[i], samples[i], cfg.W1Rounds)
		}
	}
	return out
}

// w1FromPairs fills r from the times of one goroutine's consecutive pairs: N, the
// sum of the times as Elapsed, the percentiles, and the rates of blocks (up to
// blocks of them, in order): Rate is their median, RateLo and RateHi their
// lowest and highest.
func w1FromPairs(r *Result, ds []time.Duration, blocks int) {
	blocks = max(1, min(blocks, len(ds)))
	var rates []float64
	for b := range blocks {
		var sum time.Duration
		part := ds[b*len(ds)/blocks : (b+1)*len(ds)/blocks]
		for _, d := range part {
			sum += d
		}
		r.Elapsed += sum
		if sum > 0 {
			rates = append(rates, float64(len(part))/sum.Seconds())
		}
	}
	r.N, r.Rounds = len(ds), blocks
	r.samples = append([]time.Duration(nil), ds...)
	r.fill(r.samples)
	if len(rates) > 0 {
		r.RateLo, r.Rate, r.RateHi = spreadOf(rates)
	}
}
