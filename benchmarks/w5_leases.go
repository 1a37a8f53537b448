package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/distlock/distlock"
)

// w5Attempts is the number of TryLocks W5 makes for one key before its cell
// fails.
const w5Attempts = 3

// w5SetupTimeout bounds the acquisition, and then the release, of W5's leases.
const w5SetupTimeout = 2 * time.Minute

// RunW5 runs many leases: one Client acquires cfg.W5Leases keys (keyPrefix + an
// index), cfg.W5Parallel at a time, and keeps each alive with distlock.Hold (ttl
// cfg.W5TTL, renewed every third of it) for cfg.W5Time. It measures renewals per
// second, server requests and this process's CPU time per renewal, and the live
// heap and goroutines each held lease adds. A lease lost during the window is
// counted (Lost), not an error.
func RunW5(ctx context.Context, s Subject, cfg Config, keyPrefix string) (r Result) {
	n := cfg.W5Leases
	r = newResult(s, W5, n)
	if !s.Runs(W5) || s.Unavailable != "" {
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
	lc, ok := c.(*lockerClient)
	if !ok {
		r.Unavailable = "no distlock.Locker to Hold"
		return r
	}
	// Hold's Observer counts its renewals: Hold gets the Locker itself, so it
	// sees every optional interface it looks for (LossNotifier and the like),
	// which a counting wrapper would have to copy one by one.
	var renewals atomic.Int64
	opts := &distlock.HoldOptions{TTL: cfg.W5TTL, Observer: distlock.Observer{
		OnEvent: func(_ context.Context, ev distlock.Event) {
			if ev.Op == distlock.OpRenew {
				renewals.Add(1)
			}
		},
	}}
	l := lc.l
	held := make([]*distlock.Held, n)
	hctx, cancelHolds := context.WithCancel(ctx)
	defer cancelHolds()
	defer func() {
		retried, err := releaseAll(ctx, l, held, cfg.W5Parallel)
		if err != nil && r.Err == "" {
			r.Err = err.Error()
		}
		if retried > 0 {
			r.Counter += fmt.Sprintf(" (release: %d of %d Releases failed and were tried again with Unlock)", retried, n)
		}
	}()

	heap0, g0 := liveHeap(), runtime.NumGoroutine()
	if err := acquireAll(ctx, hctx, l, held, keyPrefix, cfg, opts); err != nil {
		r.Err = err.Error()
		return r
	}
	heap1, g1 := liveHeap(), runtime.NumGoroutine()
	r.HeapPerLease = float64(heap1-heap0) / float64(n)
	r.GoroutinesPerLease = float64(g1-g0) / float64(n)

	var before int64
	var counterErr error
	if s.Requests != nil {
		before, counterErr = s.Requests.read(ctx, 0)
	}
	r0, cpu0, t0 := renewals.Load(), cpuTime(), time.Now()
	select {
	case <-time.After(cfg.W5Time):
	case <-ctx.Done():
		r.Err = ctx.Err().Error()
	}
	r.Elapsed = time.Since(t0)
	r1, cpu1 := renewals.Load(), cpuTime()
	r.N = int(r1 - r0)
	r.Rate = float64(r.N) / r.Elapsed.Seconds()
	if r.N > 0 {
		r.CPUPerOp = (cpu1 - cpu0) / time.Duration(r.N)
	}
	if s.Requests != nil && counterErr == nil {
		var after int64
		after, counterErr = s.Requests.read(ctx, 0)
		// The counter's window ends when it is read: count the renewals up to
		// then (they go on during its Lag).
		if k := renewals.Load() - r0; counterErr == nil && k > 0 {
			r.ReqPerOp = float64(after-before) / float64(k)
		}
	}
	if counterErr != nil {
		r.Counter += fmt.Sprintf(" (not read: %v)", counterErr)
	}
	for _, h := range held {
		if h != nil && h.Err() != nil {
			r.Lost++
		}
	}
	return r
}

// acquireAll fills held with leases on keyPrefix + index, each under Hold(hctx)
// with opts,
// cfg.W5Parallel at a time.
func acquireAll(ctx, hctx context.Context, l distlock.Locker, held []*distlock.Held, keyPrefix string, cfg Config, opts *distlock.HoldOptions) error {
	actx, cancel := context.WithTimeout(ctx, w5SetupTimeout)
	defer cancel()
	var ferr firstErr
	var acquired, failed atomic.Int64
	sem := make(chan struct{}, cfg.W5Parallel)
	var wg sync.WaitGroup
	for i := range held {
		if ferr.get() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			var lease distlock.Lease
			var err error
			var key string
			// A loaded server (the renewals of the leases already held) can make
			// an attempt fail (zklock: the answer came after the lease's
			// validity): a few more attempts before the cell fails, each on a
			// key of its own, since a failed attempt may leave its key held
			// until its ttl.
			for attempt := range w5Attempts {
				key = fmt.Sprintf("%s%d-%d", keyPrefix, i, attempt)
				if lease, err = l.TryLock(actx, key, cfg.W5TTL); err == nil || actx.Err() != nil {
					break
				}
				failed.Add(1)
			}
			if err != nil {
				ferr.set(fmt.Errorf("TryLock %q (%d attempts): %w", key, w5Attempts, err))
				return
			}
			held[i] = distlock.Hold(hctx, l, lease, opts)
			acquired.Add(1)
		})
	}
	wg.Wait()
	if err := ferr.get(); err != nil {
		return fmt.Errorf("acquired %d of %d leases (%d attempts failed): %w", acquired.Load(), len(held), failed.Load(), err)
	}
	return nil
}

// releaseAll releases every Held, parallel at a time, and returns the number of
// releases tried again and the first error that is not the loss of a lease (one
// lost in the window was counted; one that expired after it, its renewals behind
// on a loaded server, is not an error of the harness). A Release that fails
// otherwise (an Unlock without enough replies in time: 64 releases at once, on a
// server busy with the renewals of the other leases, can overrun RedLock's node
// timeout) is tried again as a user would, with Unlock of its lease, up to
// w5Attempts times: its nodes that released already answer that they do not hold
// it, which is then no error either.
func releaseAll(ctx context.Context, l distlock.Locker, held []*distlock.Held, parallel int) (int, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w5SetupTimeout)
	defer cancel()
	var ferr firstErr
	var retried atomic.Int64
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, h := range held {
		if h == nil {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			err := h.Release(rctx)
			if err != nil && !errors.Is(err, distlock.ErrNotHeld) {
				retried.Add(1)
				for range w5Attempts {
					if err = l.Unlock(rctx, h.Lease()); err == nil || errors.Is(err, distlock.ErrNotHeld) || rctx.Err() != nil {
						break
					}
				}
			}
			if err != nil && !errors.Is(err, distlock.ErrNotHeld) {
				ferr.set(fmt.Errorf("lease %q: Release, then %d Unlocks: %w", h.Lease().Key, w5Attempts, err))
			}
		})
	}
	wg.Wait()
	return int(retried.Load()), ferr.get()
}

// liveHeap returns the heap in use after a garbage collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// cpuTime returns this process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
