package benchmarks

import (
	"fmt"
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

	// W3Trials is the number of failovers per subject.
	W3Trials int
}

// DefaultConfig is what `make matrix` runs: about 5 minutes for all subjects.
func DefaultConfig() Config {
	return Config{
		TTL:            3 * time.Second,
		W1Goroutines:   []int{1, 16},
		W1Ops:          5000,
		W1Time:         3 * time.Second,
		W1Rounds:       6,
		W1Warmup:       5,
		W2Waiters:      16,
		W2Hold:         time.Millisecond,
		W2Acquisitions: 500,
		W2Time:         3 * time.Second,
		W3Trials:       3,
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
		W3Trials:       1,
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
	case c.W3Trials <= 0:
		return fmt.Errorf("benchmarks: Config.W3Trials %d is not positive", c.W3Trials)
	}
	for _, g := range c.W1Goroutines {
		if g <= 0 {
			return fmt.Errorf("benchmarks: W1 goroutine count %d is not positive", g)
		}
	}
	return nil
}
