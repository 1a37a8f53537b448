package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// closeTimeout bounds the Close of one Client after a cell.
const closeTimeout = 30 * time.Second

// unlockTimeout bounds one Unlock: it runs with a context of its own, so that the
// end of a cell (which cancels the acquires) never leaves a key held.
const unlockTimeout = 10 * time.Second

// A Result is one cell of the matrix: one Subject under one workload.
type Result struct {
	Subject  string
	Protocol string
	Role     Role
	// Baseline is the Subject's Baseline: the row W1's ratios compare with.
	Baseline bool
	Workload string
	// Waiter and Wakeup are the Subject's.
	Waiter bool
	Wakeup string
	// Goroutines is W1's goroutine count, W2's number of waiters, 1 for W3.
	Goroutines int
	// N counts what was measured: W1 TryLock+Unlock pairs, W2 acquisitions, W3
	// trials.
	N int
	// Elapsed is the measured time (W1, W2).
	Elapsed time.Duration
	// Rate is N per second of Elapsed (W1, W2); zero for W3.
	Rate float64
	// P50, P99 and Max are, for W1, the latency of one TryLock+Unlock pair; for
	// W2, the gap from an Unlock to the next acquisition; for W3, the time from the
	// kill to the waiter's acquisition (P99 is not computed for W3's few trials).
	P50, P99, Max time.Duration
	// Gaps is the number of W2 gaps behind P50 and P99.
	Gaps int
	// Bound is the ttl or session timeout W3 compares with (zero: none), and
	// BoundKind names it.
	Bound     time.Duration
	BoundKind string
	// Violations counts W2 acquisitions that found another holder still inside
	// its critical section: a broken mutual exclusion (should be zero).
	Violations int
	// Err is the first error of the cell; the other fields are then partial.
	Err string
	// Unavailable, when not empty, says why the cell was not measured.
	Unavailable string
	// Note is the Subject's remark.
	Note string

	samples []time.Duration // what P50, P99 and Max were computed from
}

// OK reports whether the cell was measured without error.
func (r Result) OK() bool { return r.Err == "" && r.Unavailable == "" }

func newResult(s Subject, w string, goroutines int) Result {
	return Result{Subject: s.Name, Protocol: s.Protocol, Role: s.Role, Baseline: s.Baseline, Workload: w, Waiter: s.Waiter, Wakeup: s.Wakeup,
		Goroutines: goroutines, Bound: s.Bound, BoundKind: s.BoundKind,
		Unavailable: s.Unavailable, Note: s.Note}
}

// percentile returns the p-quantile (0 < p <= 1) of sorted by nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// fill sets r's P50, P99 and Max from ds.
func (r *Result) fill(ds []time.Duration) {
	slices.Sort(ds)
	r.P50, r.P99 = percentile(ds, 0.50), percentile(ds, 0.99)
	if len(ds) > 0 {
		r.Max = ds[len(ds)-1]
	}
}

// firstErr keeps the first error that several goroutines report.
type firstErr struct {
	mu  sync.Mutex
	err error
}

func (f *firstErr) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

func (f *firstErr) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// errCloseTimeout marks a Close that did not return in time: its goroutines leak.
var errCloseTimeout = fmt.Errorf("Close did not return within %v", closeTimeout)

// closeClient closes c, waiting at most closeTimeout.
func closeClient(c Client) error {
	if c == nil {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(closeTimeout):
		return errCloseTimeout
	}
}

// An abandoner is a Held that keeps a local resource (a pooled connection) which
// must be given up, without unlocking, once its holder was killed, so that its
// Client can close.
type abandoner interface{ Abandon() }

func unlock(ctx context.Context, h Held) error {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
	defer cancel()
	return h.Unlock(uctx)
}

// RunW1Rounds runs W1 with g goroutines for each of subjects, which take turns
// for cfg.W1Rounds rounds, each round with its share of cfg.W1Ops and cfg.W1Time;
// it returns one merged Result per subject. keyPrefix(i) is the key prefix of
// subjects[i].
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
		out[i] = merge(parts[i])
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

// merge combines the results of several runs of one cell (W1's rounds): counts and
// times add up, and the percentiles are those of all the samples.
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

// RunW3 runs cfg.W3Trials failovers, each on its own key (keyPrefix + the trial).
func RunW3(ctx context.Context, s Subject, cfg Config, keyPrefix string) (r Result) {
	r = newResult(s, W3, 1)
	if !s.Runs(W3) || s.Unavailable != "" {
		return r
	}
	var ds []time.Duration
	for trial := range cfg.W3Trials {
		d, err := failover(ctx, s, fmt.Sprintf("%s%d", keyPrefix, trial))
		if err != nil {
			r.Err = fmt.Sprintf("trial %d: %v", trial, err)
			break
		}
		ds = append(ds, d)
	}
	r.N = len(ds)
	r.fill(ds)
	r.P99 = 0
	return r
}

// failover kills a holder of key and returns how long its waiter took to acquire.
func failover(ctx context.Context, s Subject, key string) (d time.Duration, err error) {
	var cr *crasher
	var route Route
	if s.Networked {
		cr = newCrasher()
		route = cr.route
		defer func() {
			if cerr := cr.close(); cerr != nil && err == nil {
				err = fmt.Errorf("close proxies: %w", cerr)
			}
		}()
	}
	holder, err := s.New(ctx, route)
	if err != nil {
		return 0, fmt.Errorf("new holder: %w", err)
	}
	holderClosed := false
	var held Held
	defer func() {
		if a, ok := held.(abandoner); ok {
			a.Abandon()
		}
		// A killed holder's Close may fail (its connections are gone); only a Close
		// that hangs is an error.
		if !holderClosed {
			if cerr := closeClient(holder); errors.Is(cerr, errCloseTimeout) && err == nil {
				err = fmt.Errorf("close holder: %w", cerr)
			}
		}
	}()
	waiter, err := s.New(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("new waiter: %w", err)
	}
	defer func() {
		if cerr := closeClient(waiter); cerr != nil && err == nil {
			err = fmt.Errorf("close waiter: %w", cerr)
		}
	}()

	if held, err = holder.TryLock(ctx, key); err != nil {
		return 0, fmt.Errorf("holder TryLock: %w", err)
	}
	limit := 15*time.Second + 3*s.Bound
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	type won struct {
		at  time.Time
		h   Held
		err error
	}
	wonc := make(chan won, 1)
	go func() {
		h, err := waiter.Lock(wctx, key)
		wonc <- won{time.Now(), h, err}
	}()

	killed := time.Now()
	if s.Networked {
		cr.cut()
	} else {
		holderClosed = true
		if err := closeClient(holder); errors.Is(err, errCloseTimeout) {
			<-wonc
			return 0, fmt.Errorf("close holder (the kill): %w", err)
		}
	}
	w := <-wonc
	if w.err != nil {
		return 0, fmt.Errorf("waiter Lock (limit %v): %w", limit, w.err)
	}
	d = w.at.Sub(killed)
	if err := unlock(ctx, w.h); err != nil && !errors.Is(err, context.Canceled) {
		return d, fmt.Errorf("waiter Unlock: %w", err)
	}
	return d, nil
}
