package conformance

import (
	"context"
	"sync"
	"time"

	"github.com/distlock/distlock"
)

// A history collects the Events of an exploration, safe for concurrent use.
type history struct {
	start time.Time
	mu    sync.Mutex
	evs   []Event
}

func newHistory() *history { return &history{start: time.Now()} }

// at is t as an offset from the history's start (monotonic).
func (h *history) at(t time.Time) time.Duration { return t.Sub(h.start) }

func (h *history) add(e Event) {
	h.mu.Lock()
	h.evs = append(h.evs, e)
	h.mu.Unlock()
}

// events returns the history so far, in the order the calls returned.
func (h *history) events() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Event(nil), h.evs...)
}

// A recorder is a Locker that records every call it passes to the client's Locker.
// Hold and distlock.Lock are run on it, so their Renews, TryLocks and Unlocks are
// in the history too; lossRecorder and watchRecorder keep the client's loss signal
// visible to Hold.
type recorder struct {
	l      distlock.Locker
	client int
	h      *history
}

// record returns a recorder of l as client c, with l's loss signal.
func record(l distlock.Locker, c int, h *history) distlock.Locker {
	r := recorder{l: l, client: c, h: h}
	switch ll := l.(type) {
	case distlock.LossWatcher:
		return watchRecorder{r, ll}
	case distlock.LossNotifier:
		return lossRecorder{r, ll}
	}
	return r
}

// call records one call on key by the client: f runs it and returns the lease.
func (r recorder) call(ctx context.Context, op, key string, ttl time.Duration, arg distlock.Lease, f func() (distlock.Lease, error)) (distlock.Lease, error) {
	var deadline time.Duration
	inv := time.Now()
	if d, ok := ctx.Deadline(); ok {
		deadline = d.Sub(inv)
	}
	lease, err := f()
	ret := time.Now()
	e := Event{Client: r.client, Op: op, Key: key, TTL: ttl, Deadline: deadline, Invoke: r.h.at(inv), Return: r.h.at(ret),
		Token: arg.Token, Fence: arg.Fence, Outcome: outcome(err)}
	switch {
	case err != nil:
		e.Err = err.Error()
	case op == OpRenew:
		// The lease renewed keeps its Token; a Renew that returns another lease
		// says so in Err (Check reports it).
		e.Fence, e.Expires = lease.Fence, r.h.at(lease.Expires)
		if lease.Token != arg.Token {
			e.Err = "returned the lease of token " + lease.Token
		}
	case op == OpTryLock || op == OpLock:
		e.Token, e.Fence, e.Expires = lease.Token, lease.Fence, r.h.at(lease.Expires)
	}
	r.h.add(e)
	return lease, err
}

func (r recorder) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	return r.call(ctx, OpTryLock, key, ttl, distlock.Lease{}, func() (distlock.Lease, error) { return r.l.TryLock(ctx, key, ttl) })
}

func (r recorder) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	return r.call(ctx, OpRenew, lease.Key, ttl, lease, func() (distlock.Lease, error) { return r.l.Renew(ctx, lease, ttl) })
}

func (r recorder) Unlock(ctx context.Context, lease distlock.Lease) error {
	_, err := r.call(ctx, OpUnlock, lease.Key, 0, lease, func() (distlock.Lease, error) { return lease, r.l.Unlock(ctx, lease) })
	return err
}

// lock records distlock.Lock on the client's own Locker (so that it waits through
// the client's Waiter) as one OpLock.
func (r recorder) lock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	return r.call(ctx, OpLock, key, ttl, distlock.Lease{}, func() (distlock.Lease, error) { return distlock.Lock(ctx, r.l, key, ttl, nil) })
}

// heldEnd records a Held of lease made at start whose Context ended at end.
func (r recorder) heldEnd(lease distlock.Lease, start, end time.Time) {
	r.h.add(Event{Client: r.client, Op: OpHeldEnd, Key: lease.Key, Invoke: r.h.at(start), Return: r.h.at(end), Token: lease.Token, Fence: lease.Fence})
}

// closed records the client's Close (or, for a session backend, its crash): its
// leases end there.
func (r recorder) closed(op string, inv, ret time.Time, err error) {
	e := Event{Client: r.client, Op: op, Invoke: r.h.at(inv), Return: r.h.at(ret), Outcome: outcome(err)}
	if err != nil {
		e.Err = err.Error()
	}
	r.h.add(e)
}

type lossRecorder struct {
	recorder
	n distlock.LossNotifier
}

func (r lossRecorder) Lost(lease distlock.Lease) <-chan struct{} { return r.n.Lost(lease) }

type watchRecorder struct {
	recorder
	w distlock.LossWatcher
}

func (r watchRecorder) Lost(lease distlock.Lease) <-chan struct{} { return r.w.Lost(lease) }

func (r watchRecorder) AfterLost(lease distlock.Lease, f func()) func() bool {
	return r.w.AfterLost(lease, f)
}
