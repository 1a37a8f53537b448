package benchmarks

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// RunW4 runs the herd: cfg.W4Waiters goroutines, spread over cfg.W4Clients
// Clients, block on key with the Client's Lock (distlock.Lock, which waits with
// the Locker's Waiter when it has one) while a first holder has it. Then holders
// take turns: each holds the key cfg.W4Hold and unlocks, and its goroutine ends.
// It measures the gap from the moment one holder calls Unlock to the next
// holder's acquisition, as W2 does (from Unlock's return, backends that release
// the key before their Unlock returns, etcdlock's revoke, gave gaps below zero),
// for up to cfg.W4Handoffs handoffs or cfg.W4Time, and the
// server requests per handoff, read from the server's own counter before the
// first release and while the last measured holder holds the key.
func RunW4(ctx context.Context, s Subject, cfg Config, key string) (r Result) {
	n, target := cfg.W4Waiters, cfg.W4Handoffs
	r = newResult(s, W4, n)
	if !s.Runs(W4) || s.Unavailable != "" {
		return r
	}
	clients := make([]Client, 0, cfg.W4Clients)
	defer func() {
		for _, c := range clients {
			if err := closeClient(c); err != nil && r.Err == "" {
				r.Err = fmt.Sprintf("close: %v", err)
			}
		}
	}()
	for range cfg.W4Clients {
		c, err := s.New(ctx, nil)
		if err != nil {
			r.Err = fmt.Sprintf("new client: %v", err)
			return r
		}
		clients = append(clients, c)
	}
	first, err := clients[0].TryLock(ctx, key)
	if err != nil {
		r.Err = fmt.Sprintf("first holder's TryLock: %v", err)
		return r
	}

	epoch := time.Now() // the one monotonic clock of every timestamp below
	since := func() time.Duration { return time.Since(epoch) }
	var (
		ferr       firstErr
		mu         sync.Mutex
		seq        int  // acquisitions so far (the first holder's is 0), under mu
		closed     bool // no acquisition counts any more (under mu)
		acqAt      = make([]time.Duration, target+1)
		unlockedAt = make([]time.Duration, target+1)
		holders    atomic.Int32
		violations atomic.Int32
		before     int64
		after      int64
		counterErr error
		reached    = make(chan struct{})
		stopOnce   sync.Once
		stopAt     time.Duration
		wg         sync.WaitGroup
	)
	for i := range acqAt {
		acqAt[i], unlockedAt[i] = -1, -1
	}
	lockCtx, cancelLocks := context.WithCancel(ctx)
	defer cancelLocks()
	stop := func() {
		stopOnce.Do(func() {
			stopAt = since()
			cancelLocks()
		})
	}
	// readAfter reads the counter at the end of the measured part; mu is held.
	readAfter := func() {
		closed = true
		if s.Requests != nil && counterErr == nil {
			after, counterErr = s.Requests.read(ctx, 0)
		}
	}

	wg.Add(n)
	for i := range n {
		c := clients[i%len(clients)]
		go func() {
			defer wg.Done()
			h, err := c.Lock(lockCtx, key)
			if err != nil {
				if lockCtx.Err() == nil {
					ferr.set(fmt.Errorf("Lock: %w", err))
					stop()
				}
				return
			}
			at := since()
			if holders.Add(1) != 1 {
				violations.Add(1)
			}
			mu.Lock()
			idx := -1
			if !closed {
				seq++
				idx = seq
				acqAt[idx] = at
				if idx == target {
					// The last measured holder reads the counter while it holds
					// the key: no handoff happens in between.
					readAfter()
					close(reached)
				}
			}
			mu.Unlock()
			if idx > 0 && idx < target {
				time.Sleep(cfg.W4Hold) // the critical section
			}
			holders.Add(-1)
			if idx > 0 && idx < target {
				unlockedAt[idx] = since()
			}
			if err := unlock(ctx, h); err != nil {
				ferr.set(fmt.Errorf("Unlock: %w", err))
				stop()
			}
		}()
	}

	// The waiters block (their first TryLock fails); then the first release.
	settle := time.NewTimer(cfg.W4Settle)
	select {
	case <-settle.C:
	case <-ctx.Done():
	}
	if s.Requests != nil {
		b, err := s.Requests.read(ctx, cfg.W4Settle)
		b, err = quiet(ctx, s.Requests, b, err, n, cfg.TTL*2/3-cfg.W4Settle)
		mu.Lock()
		before, counterErr = b, err
		mu.Unlock()
	}
	t0 := since()
	unlockedAt[0] = t0
	if err := unlock(ctx, first); err != nil {
		ferr.set(fmt.Errorf("first holder's Unlock: %w", err))
		stop()
	}
	timer := time.NewTimer(cfg.W4Time)
	select {
	case <-reached:
	case <-timer.C:
		mu.Lock()
		if !closed {
			readAfter()
		}
		mu.Unlock()
	case <-lockCtx.Done():
	}
	timer.Stop()
	stop()
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-ctx.Done():
		ferr.set(fmt.Errorf("waiters did not stop: %w", ctx.Err()))
		<-finished
	}

	mu.Lock()
	handoffs, counted := min(seq, target), closed // counted: the counter was read at the end
	mu.Unlock()
	var ds []time.Duration
	for i := 1; i <= handoffs; i++ {
		if acqAt[i] >= 0 && unlockedAt[i-1] >= 0 {
			ds = append(ds, acqAt[i]-unlockedAt[i-1])
		}
	}
	r.N, r.Gaps = handoffs, len(ds)
	r.Elapsed = stopAt - t0
	if r.Elapsed > 0 {
		r.Rate = float64(r.N) / r.Elapsed.Seconds()
	}
	r.fill(ds)
	r.Violations = int(violations.Load())
	switch {
	case s.Requests == nil:
	case counterErr != nil:
		r.Counter += fmt.Sprintf(" (not read: %v)", counterErr)
	case handoffs > 0 && counted:
		r.ReqPerOp = float64(after-before) / float64(handoffs)
	}
	if err := ferr.get(); err != nil {
		r.Err = err.Error()
	}
	return r
}

// quietWindow is how often quiet reads the counter.
const quietWindow = 100 * time.Millisecond

// quiet waits, up to limit, until the server counter c grows by at most waiters/100
// requests in a quietWindow: the herd's first TryLocks have all been answered and
// its waiters wait, so that the handoffs' count does not include them (on a slow
// machine 1 s is not always enough for 1,000 waiters' first attempts). last is the
// reading taken now (and its error); quiet returns the last reading.
func quiet(ctx context.Context, c *Counter, last int64, err error, waiters int, limit time.Duration) (int64, error) {
	deadline := time.Now().Add(limit)
	for err == nil && time.Now().Before(deadline) {
		select {
		case <-time.After(quietWindow):
		case <-ctx.Done():
			return last, ctx.Err()
		}
		v, rerr := c.read(ctx, quietWindow)
		if rerr != nil {
			return v, rerr
		}
		grew := v - last
		last = v
		if grew <= int64(max(waiters/100, 1)) {
			break
		}
	}
	return last, err
}
