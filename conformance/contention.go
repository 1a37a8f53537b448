package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// An Acquisition is one successful acquisition seen by a contention run, with its
// local window: from when TryLock returned to when Unlock was sent, or to the lease's
// Expires if that came first. The real window on the server contains it.
type Acquisition struct {
	Key      string
	Fence    uint64
	Token    string
	Start    time.Time // before the acquiring request was sent
	Acquired time.Time // when the acquiring call returned
	End      time.Time // min(just before Unlock was sent, Expires)
	Expires  time.Time // as TryLock returned it, before any Renew
	TTL      time.Duration
}

// CheckHistory returns every violation of the contract in a history of acquisitions:
// windows of one key that overlap, fences that do not increase in acquisition order,
// reused tokens, and Expires later than Start + TTL.
func CheckHistory(history []Acquisition) []error {
	var errs []error
	tokens := make(map[string]bool)
	byKey := make(map[string][]Acquisition)
	for _, a := range history {
		byKey[a.Key] = append(byKey[a.Key], a)
		if tokens[a.Token] {
			errs = append(errs, fmt.Errorf("%s: Token %q was issued twice", rLease, a.Token))
		}
		tokens[a.Token] = true
		if excess, late := expiresLate(a.Start, a.Acquired, a.Expires, a.TTL); late {
			errs = append(errs, fmt.Errorf("%s: Expires is %v after the request's start + ttl", rLease, excess))
		}
	}
	for key, as := range byKey {
		slices.SortFunc(as, func(x, y Acquisition) int { return x.Acquired.Compare(y.Acquired) })
		for i := 1; i < len(as); i++ {
			prev, cur := as[i-1], as[i]
			if cur.Acquired.Before(prev.End) {
				errs = append(errs, fmt.Errorf("%s: key %q: acquisition with fence %d returned %v before the holder with fence %d unlocked or expired",
					rMutex, key, cur.Fence, prev.End.Sub(cur.Acquired), prev.Fence))
			}
			if cur.Fence <= prev.Fence {
				errs = append(errs, fmt.Errorf("%s: key %q: fence %d follows fence %d in acquisition order", rFence, key, cur.Fence, prev.Fence))
			}
		}
	}
	return errs
}

// testContention runs 8 clients x 3 goroutines over 3 keys; every acquisition bumps an
// unguarded counter (read, yield, write), so lost updates show overlap too.
func (s *suite) testContention(t *testing.T) {
	const clients, goroutines, keys, rounds = 8, 3, 3, 5
	run := &contentionRun{
		keys:     make([]string, keys),
		counters: make([]atomic.Int64, keys),
		ttl:      max(2*time.Second, 4*s.ttl),
	}
	for i := range run.keys {
		run.keys[i] = s.key(t)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second+20*s.op)
	defer cancel()
	var wg sync.WaitGroup
	for c := range clients {
		l := s.client(t)
		for g := range goroutines {
			wg.Go(func() {
				for r := range rounds {
					if !run.round(ctx, l.Locker, (c+g+r)%keys, r%2 == 1) {
						return
					}
				}
			})
		}
	}
	wg.Wait()
	run.judge(t, clients*goroutines*rounds)
}

// contentionRun is what the goroutines of a contention run share: its keys, a counter
// per key that only the key's holder bumps, unguarded, and what they recorded.
type contentionRun struct {
	keys     []string
	counters []atomic.Int64
	ttl      time.Duration

	mu       sync.Mutex
	history  []Acquisition
	failures []error
}

func (run *contentionRun) fail(err error) {
	run.mu.Lock()
	run.failures = append(run.failures, err)
	run.mu.Unlock()
}

// round acquires keys[k], bumps its counter, renews the lease once when renew is
// set, unlocks, and records the acquisition. It reports false when it could not
// acquire the key.
func (run *contentionRun) round(ctx context.Context, l distlock.Locker, k int, renew bool) bool {
	key := run.keys[k]
	lease, start, acquired, err := acquire(ctx, l, key, run.ttl)
	first := lease.Expires
	if err != nil {
		run.fail(fmt.Errorf("acquiring %q: %w", key, err))
		return false
	}
	v := run.counters[k].Load()
	runtime.Gosched()
	run.counters[k].Store(v + 1)
	if renew { // exercise Renew inside the window
		if next, err := l.Renew(ctx, lease, run.ttl); err == nil {
			lease = next
		} else if !errors.Is(err, distlock.ErrNotHeld) {
			run.fail(fmt.Errorf("Renew(%q): %w", key, err))
		}
	}
	end := time.Now()
	uerr := l.Unlock(context.WithoutCancel(ctx), lease)
	if end.After(lease.Expires) {
		end = lease.Expires
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	run.history = append(run.history, Acquisition{Key: key, Fence: lease.Fence, Token: lease.Token,
		Start: start, Acquired: acquired, End: end, Expires: first, TTL: run.ttl})
	if uerr != nil && !(errors.Is(uerr, distlock.ErrNotHeld) && time.Now().After(lease.Expires)) {
		run.failures = append(run.failures, fmt.Errorf("Unlock(%q) of a lease within its ttl: %w", key, uerr))
	}
	return true
}

// judge fails t for every failed call and contract violation of the run, for a
// counter that lost updates, and, when no call failed, for a count of acquisitions
// other than want.
func (run *contentionRun) judge(t *testing.T, want int) {
	for _, err := range run.failures {
		t.Errorf("%s: contention run: %v", rMutex, err)
	}
	for _, err := range CheckHistory(run.history) {
		t.Error(err)
	}
	total := 0
	for k, key := range run.keys {
		n := 0
		for _, a := range run.history {
			if a.Key == key {
				n++
			}
		}
		if got := run.counters[k].Load(); got != int64(n) {
			t.Errorf("%s: key %q: an unguarded counter bumped under the lock reads %d after %d acquisitions (lost updates mean overlapping holders)", rMutex, key, got, n)
		}
		total += n
	}
	if total != want && len(run.failures) == 0 {
		t.Errorf("%s: contention run recorded %d acquisitions, want %d", rMutex, total, want)
	}
}

// acquire retries TryLock until it succeeds, waiting through the Locker's Wait when
// it has one and polling with jitter otherwise. It returns the successful attempt's
// start and return times.
func acquire(ctx context.Context, l distlock.Locker, key string, ttl time.Duration) (lease distlock.Lease, start, returned time.Time, err error) {
	w, _ := l.(distlock.Waiter)
	for {
		start = time.Now()
		lease, err = l.TryLock(ctx, key, ttl)
		returned = time.Now()
		if err == nil || !errors.Is(err, distlock.ErrLocked) {
			return lease, start, returned, err
		}
		if w != nil {
			wctx, cancel := context.WithTimeout(ctx, time.Second)
			_ = w.Wait(wctx, key)
			cancel()
		} else {
			sleepCtx(ctx, time.Duration(rand.Int64N(int64(5*time.Millisecond))))
		}
		if ctx.Err() != nil {
			return lease, start, returned, errors.Join(err, ctx.Err())
		}
	}
}
