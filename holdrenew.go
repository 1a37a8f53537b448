package distlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// The renewal chain of a Held: one timer function per lease that renews it and
// arms the next renewal.

// renew is the renewal chain's timer function: it renews the lease (or finds it
// expired) and arms the next renewal.
func (h *Held) renew() {
	h.mu.Lock()
	h.armed = false
	lease := h.lease
	h.mu.Unlock()
	next, retry := h.renewOnce(lease)
	h.mu.Lock()
	defer h.mu.Unlock()
	if next <= 0 || h.cause != nil {
		h.ended()
		return
	}
	if retry {
		next = retryDelay(h.o.Every)
	}
	h.armed = true
	h.timer.Reset(h.wait(h.lease, next))
}

// renewOnce makes one renewal of lease. It returns the wait before the next one and
// whether that is a retry, or 0 when the chain ends (the Held stopped, or the lease
// is lost).
func (h *Held) renewOnce(lease Lease) (next time.Duration, retry bool) {
	if h.halted() {
		return 0, false
	}
	if lease.Remaining() <= 0 {
		// Expired before a renewal succeeded (they kept failing, or the process
		// stalled past Expires): lost.
		h.lose(fmt.Errorf("%w: key %q: lease expired before a renewal succeeded", ErrNotHeld, lease.Key))
		return 0, false
	}
	start := time.Now()
	rctx, cancel := context.WithDeadline(h.parent, lease.Expires)
	h.mu.Lock()
	if h.cause != nil {
		h.mu.Unlock()
		cancel()
		return 0, false
	}
	h.renewing = cancel // halt cancels it
	h.mu.Unlock()
	// The lease's Expires ends the Held whatever Renew does: a Renew that overstays
	// its ctx (a batch that waits for others, a client that does not watch ctx while
	// the server is silent) must not keep Context() alive past Expires. rctx's
	// deadline is Expires, or Hold's ctx's earlier one, which halts the Held itself.
	stopExpiry := context.AfterFunc(rctx, func() {
		if h.parent.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
			h.lose(fmt.Errorf("%w: key %q: lease expired while a renewal was in flight", ErrNotHeld, lease.Key))
		}
	})
	renewed, err := h.l.Renew(rctx, lease, h.o.TTL)
	stopExpiry()
	h.mu.Lock()
	h.renewing = nil
	h.mu.Unlock()
	cancel()
	h.emit(Event{Op: OpRenew, Key: lease.Key, Fence: lease.Fence, Took: time.Since(start), Err: err})
	switch {
	case err == nil:
		h.mu.Lock()
		h.lease = renewed
		h.mu.Unlock()
		return h.period(renewed), false
	case h.halted():
		return 0, false
	case errors.Is(err, ErrNotHeld):
		h.lose(fmt.Errorf("key %q: renew: %w", lease.Key, err))
		return 0, false
	case errors.Is(err, ErrInvalid):
		h.lose(fmt.Errorf("%w: key %q: renew: %w", ErrNotHeld, lease.Key, err))
		return 0, false
	default:
		// Transient: try again soon; the lease's Expires bounds the retries.
		return 1, true
	}
}

// wait is how long the chain's timer waits for a renewal due after d: no later than
// lease's Expires, when the renewal finds it expired and the loss is reported.
func (h *Held) wait(lease Lease, d time.Duration) time.Duration {
	return max(min(d, lease.Remaining()), 0)
}

// period is the wait before the next renewal: Every, or a third of the lease's
// remaining time when the backend granted less than TTL (ZooKeeper caps Expires at
// the session timeout, RedLock subtracts clock drift).
func (h *Held) period(lease Lease) time.Duration {
	return max(min(h.o.Every, lease.Remaining()/3), time.Millisecond)
}

// retryDelay is the pause before retrying a failed renewal: a tenth of the period,
// between 5ms and 1s, with jitter.
func retryDelay(every time.Duration) time.Duration {
	d := min(max(every/10, 5*time.Millisecond), time.Second)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}
