package benchmarks

import (
	"context"
	"fmt"
	"slices"
	"sync"
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
	// Goroutines is W1's goroutine count, W2's and W4's number of waiters, 1
	// for W3, W5's number of leases held at once.
	Goroutines int
	// N counts what was measured: W1 TryLock+Unlock pairs, W2 acquisitions, W3
	// trials, W4 handoffs, W5 renewals.
	N int
	// Elapsed is the measured time (W1, W2).
	Elapsed time.Duration
	// Rate is N per second of Elapsed (W2, W4, W5); for W1 the median of the
	// rounds' rates, RateLo and RateHi the lowest and the highest of them (the
	// spread); zero for W3.
	Rate           float64
	RateLo, RateHi float64
	// P50, P99 and Max are, for W1, the latency of one TryLock+Unlock pair; for
	// W2, the gap from an Unlock to the next acquisition (P50: the median of the
	// rounds' p50s); for W3, the time from the kill to the waiter's acquisition
	// (P99 is not computed for W3's few trials); for W4, the gap from the
	// moment a holder calls Unlock to the next holder's acquisition.
	P50, P99, Max time.Duration
	// Gaps is the number of W2 or W4 gaps behind P50 and P99.
	Gaps int
	// Rounds is the number of W1's or W2's rounds; for W2, P50Lo and P50Hi are the lowest and
	// the highest of their gap p50s: the spread.
	Rounds       int
	P50Lo, P50Hi time.Duration
	// ReqPerOp is the server requests per W4 handoff or per W5 renewal, read
	// from the server's own counter (Counter names it); negative when the
	// subject has none or it could not be read.
	ReqPerOp float64
	Counter  string
	// For W5: CPUPerOp is this process's CPU time (user + system) per renewal;
	// HeapPerLease (bytes, live heap after a GC) and GoroutinesPerLease are what
	// each held lease adds; Lost counts the leases lost during the window.
	CPUPerOp           time.Duration
	HeapPerLease       float64
	GoroutinesPerLease float64
	Lost               int
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
	r := Result{Subject: s.Name, Protocol: s.Protocol, Role: s.Role, Baseline: s.Baseline, Workload: w, Waiter: s.Waiter, Wakeup: s.Wakeup,
		Goroutines: goroutines, Bound: s.Bound, BoundKind: s.BoundKind,
		Unavailable: s.Unavailable, Note: s.Note, ReqPerOp: -1}
	if s.Requests != nil && (w == W4 || w == W5) {
		r.Counter = s.Requests.Name
	}
	return r
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
