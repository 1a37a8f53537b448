package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/redlock"
)

// A workload is a contention run: goroutines on several Lockers take turns on a few
// keys, bump an unguarded counter per key inside each lease, and record every
// acquisition for conformance.CheckHistory.
type workload struct {
	lockers    []*redlock.Locker
	keys       []string
	goroutines int           // per Locker
	ttl        time.Duration // of every lease
	// rounds is how many leases each goroutine takes; when more is set, goroutines
	// go on until it returns false (checked between rounds) instead.
	rounds int
	more   func() bool
	// tolerate makes goroutines retry TryLock errors that are not ErrLocked (nodes
	// that are restarting) instead of failing the run.
	tolerate bool
}

// run runs the workload and reports any violation of the contract with t.Errorf
// (so it may run off the test's goroutine).
func (w workload) run(t *testing.T) []conformance.Acquisition {
	var (
		mu         sync.Mutex
		history    []conformance.Acquisition
		failures   []error
		retried    atomic.Int64
		unlockErrs atomic.Int64
		slowest    atomic.Int64 // longest wait for one acquisition, in ns
		wg         sync.WaitGroup
	)
	counters := make([]atomic.Int64, len(w.keys))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	fail := func(err error) {
		mu.Lock()
		failures = append(failures, err)
		mu.Unlock()
	}
	for li, l := range w.lockers {
		for g := range w.goroutines {
			wg.Go(func() {
				for r := 0; ; r++ {
					if w.more != nil && !w.more() || w.more == nil && r >= w.rounds {
						return
					}
					k := (li + g + r) % len(w.keys)
					key := w.keys[k]
					var lease distlock.Lease
					var start, acquired time.Time
					began := time.Now()
					for {
						var err error
						lease, start, acquired, err = acquire(ctx, l, key, w.ttl)
						if err == nil {
							break
						}
						if !w.tolerate || ctx.Err() != nil || errors.Is(err, distlock.ErrInvalid) {
							fail(fmt.Errorf("acquiring %q: %w", key, err))
							return
						}
						retried.Add(1)
						select {
						case <-time.After(20 * time.Millisecond):
						case <-ctx.Done():
						}
					}
					if d := int64(time.Since(began)); d > slowest.Load() {
						slowest.Store(d) // racy max, good enough for a log line
					}
					first := lease.Expires
					v := counters[k].Load()
					runtime.Gosched()
					counters[k].Store(v + 1)
					if r%2 == 1 {
						if next, err := l.Renew(ctx, lease, w.ttl); err == nil {
							lease = next
						} else if !w.tolerate {
							fail(fmt.Errorf("Renew(%q) of a lease within its ttl: %w", key, err))
						}
					}
					// The holder stops using the lease when it sends Unlock, whatever
					// Unlock returns (as in the conformance suite).
					end := time.Now()
					uerr := l.Unlock(context.WithoutCancel(ctx), lease)
					if end.After(lease.Expires) {
						end = lease.Expires
					}
					if uerr != nil {
						unlockErrs.Add(1)
					}
					if uerr != nil && !w.tolerate && !(errors.Is(uerr, distlock.ErrNotHeld) && time.Now().After(lease.Expires)) {
						fail(fmt.Errorf("Unlock(%q) of a lease within its ttl: %w", key, uerr))
					}
					mu.Lock()
					history = append(history, conformance.Acquisition{Key: key, Fence: lease.Fence, Token: lease.Token,
						Start: start, Acquired: acquired, End: end, Expires: first, TTL: w.ttl})
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	for _, err := range failures {
		t.Errorf("contention run: %v", err)
	}
	for _, err := range conformance.CheckHistory(history) {
		t.Error(err)
	}
	for k, key := range w.keys {
		n := int64(0)
		for _, a := range history {
			if a.Key == key {
				n++
			}
		}
		if got := counters[k].Load(); got != n {
			t.Errorf("key %q: an unguarded counter bumped under the lock reads %d after %d acquisitions (overlapping holders)", key, got, n)
		}
	}
	t.Logf("contention run: %d acquisitions over %d keys, %d TryLock errors retried, %d Unlock errors, slowest acquisition %v", len(history), len(w.keys), retried.Load(), unlockErrs.Load(), time.Duration(slowest.Load()))
	return history
}
