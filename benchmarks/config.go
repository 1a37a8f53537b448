package benchmarks

import (
	"fmt"
	"slices"
	"time"
)

// Config sizes the workloads. Every cell stops at its op count or its time limit,
// whichever comes first, so that a whole matrix run stays within minutes on a small
// shared machine.
type Config struct {
	// TTL is the lease ttl of every acquisition, and the session timeout of the
	// session-based subjects (ZooKeeper sessions, etcd concurrency sessions), so
	// that W3 compares like with like.
	TTL time.Duration

	// W1Goroutines are the goroutine counts of W1's cells.
	W1Goroutines []int
	// W1Ops bounds the TryLock+Unlock pairs of one W1 cell (all goroutines
	// together); W1Time bounds its duration.
	W1Ops  int
	W1Time time.Duration
	// W1Rounds splits each W1 cell into rounds: the subjects of one protocol take
	// turns, round by round, each round with a share of W1Ops and W1Time, so
	// that a change in the machine's load hits all of them alike.
	W1Rounds int
	// W1Warmup is the number of pairs each goroutine runs before the clock starts
	// (connections, script loading).
	W1Warmup int

	// W2Waiters is the number of clients that take turns on W2's key, each holding
	// it for W2Hold. W2Acquisitions and W2Time bound the measured part.
	W2Waiters      int
	W2Hold         time.Duration
	W2Acquisitions int
	W2Time         time.Duration

	// W2Rounds splits each W2 cell into rounds, like W1Rounds: the subjects of
	// one protocol take turns, each round with its share of W2Acquisitions and
	// W2Time; the report gives the median of the rounds' gap p50 and their
	// spread (the lowest and the highest).
	W2Rounds int

	// W3Trials is the number of failovers per subject.
	W3Trials int

	// W4Waiters goroutines, spread over W4Clients Clients, wait on one key with a
	// blocking acquire (the herd); each holder holds it W4Hold. W4Handoffs and
	// W4Time bound the measured part; W4Settle is the time the waiters get to
	// block before the first release.
	W4Waiters  int
	W4Clients  int
	W4Hold     time.Duration
	W4Handoffs int
	W4Time     time.Duration
	W4Settle   time.Duration

	// W5Leases keys are held at once under distlock.Hold with ttl W5TTL (renewed
	// every W5TTL/3) by one Client, for W5Time; they are acquired W5Parallel at a
	// time.
	W5Leases   int
	W5TTL      time.Duration
	W5Time     time.Duration
	W5Parallel int

	// Workloads, when not empty, lists the workloads to run (W1 ... W5); empty
	// runs them all.
	Workloads []string `json:",omitempty"`
}

// Runs reports whether c selects workload w.
func (c Config) Runs(w string) bool {
	return len(c.Workloads) == 0 || slices.Contains(c.Workloads, w)
}

// w2Rounds is W2Rounds, at least 1 (a Config read from an older matrix.csv has 0).
func (c Config) w2Rounds() int { return max(c.W2Rounds, 1) }

// DefaultConfig is what `make matrix` runs: about 10 minutes for all subjects
// (W4 and W5 take up to about 20s per backend).
func DefaultConfig() Config {
	return Config{
		TTL:            3 * time.Second,
		W1Goroutines:   []int{1, 16},
		W1Ops:          20000,
		W1Time:         3 * time.Second,
		W1Rounds:       6,
		W1Warmup:       5,
		W2Waiters:      16,
		W2Hold:         time.Millisecond,
		W2Acquisitions: 500,
		W2Time:         3 * time.Second,
		W2Rounds:       3,
		W3Trials:       3,
		W4Waiters:      1000,
		W4Clients:      4,
		W4Hold:         time.Millisecond,
		W4Handoffs:     100,
		W4Time:         10 * time.Second,
		W4Settle:       time.Second, // well within the first holder's ttl
		W5Leases:       10000,
		W5TTL:          3 * time.Second,
		W5Time:         6 * time.Second,
		W5Parallel:     64,
	}
}

// SmokeConfig runs every workload tiny: for CI, against memlock.
func SmokeConfig() Config {
	return Config{
		TTL:            200 * time.Millisecond,
		W1Goroutines:   []int{1, 16},
		W1Ops:          20,
		W1Time:         time.Second,
		W1Rounds:       2,
		W1Warmup:       1,
		W2Waiters:      16,
		W2Hold:         time.Millisecond,
		W2Acquisitions: 20,
		W2Time:         time.Second,
		W2Rounds:       1,
		W3Trials:       1,
		W4Waiters:      50,
		W4Clients:      4,
		W4Hold:         time.Millisecond,
		W4Handoffs:     10,
		W4Time:         2 * time.Second,
		W4Settle:       100 * time.Millisecond,
		W5Leases:       500,
		W5TTL:          time.Second, // a renewal every 333ms: -race on a busy machine loses none
		W5Time:         700 * time.Millisecond,
		W5Parallel:     16,
	}
}

// Validate reports a Config that cannot run.
func (c Config) Validate() error {
	switch {
	case c.TTL <= 0:
		return fmt.Errorf("benchmarks: Config.TTL %v is not positive", c.TTL)
	case len(c.W1Goroutines) == 0:
		return fmt.Errorf("benchmarks: Config.W1Goroutines is empty")
	case c.W1Ops <= 0 || c.W1Time <= 0 || c.W1Warmup < 0 || c.W1Rounds <= 0 || c.W1Ops < c.W1Rounds:
		return fmt.Errorf("benchmarks: bad W1 bounds (ops %d, time %v, rounds %d, warmup %d)", c.W1Ops, c.W1Time, c.W1Rounds, c.W1Warmup)
	case c.W2Waiters < 2 || c.W2Hold < 0 || c.W2Acquisitions <= 0 || c.W2Time <= 0:
		return fmt.Errorf("benchmarks: bad W2 bounds (waiters %d, hold %v, acquisitions %d, time %v)", c.W2Waiters, c.W2Hold, c.W2Acquisitions, c.W2Time)
	case c.W2Rounds <= 0 || c.W2Acquisitions < c.W2Rounds:
		return fmt.Errorf("benchmarks: bad W2 rounds %d (acquisitions %d)", c.W2Rounds, c.W2Acquisitions)
	case c.W3Trials <= 0:
		return fmt.Errorf("benchmarks: Config.W3Trials %d is not positive", c.W3Trials)
	case c.W4Waiters < 2 || c.W4Clients <= 0 || c.W4Hold < 0 || c.W4Handoffs <= 0 || c.W4Time <= 0 || c.W4Settle < 0:
		return fmt.Errorf("benchmarks: bad W4 bounds (waiters %d, clients %d, hold %v, handoffs %d, time %v, settle %v)", c.W4Waiters, c.W4Clients, c.W4Hold, c.W4Handoffs, c.W4Time, c.W4Settle)
	case c.W5Leases <= 0 || c.W5TTL <= 0 || c.W5Time <= 0 || c.W5Parallel <= 0:
		return fmt.Errorf("benchmarks: bad W5 bounds (leases %d, ttl %v, time %v, parallel %d)", c.W5Leases, c.W5TTL, c.W5Time, c.W5Parallel)
	}
	for _, w := range c.Workloads {
		if !slices.Contains(Workloads, w) {
			return fmt.Errorf("benchmarks: unknown workload %q (want one of %v)", w, Workloads)
		}
	}
	for _, g := range c.W1Goroutines {
		if g <= 0 {
			return fmt.Errorf("benchmarks: W1 goroutine count %d is not positive", g)
		}
	}
	return nil
}
