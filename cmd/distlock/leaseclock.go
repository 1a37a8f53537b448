package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock"
)

// A leaseClock follows when the lease that run holds ends, from the renewals
// themselves: it sees every Renew that Hold makes (through the Locker that track
// returns), so it does not depend on when Hold's goroutine gets to run.
//
// The lease is certainly held until end: the Expires of the first lease, moved
// on by every renewal that started before end and succeeded (a renewal that started
// later could not close the gap: CMD may have run without the lease in between).
// Once the lease has ended (end passed, or the backend said it was lost) the clock
// is settled: end no longer moves, and later renewals are refused, so that Hold
// gives the lease up too.
type leaseClock struct {
	mu      sync.Mutex
	end     time.Time
	settled bool
	early   bool // the lease was lost before it would have expired
}

func newLeaseClock(lease distlock.Lease) *leaseClock {
	return &leaseClock{end: lease.Expires}
}

// deadline returns the current end of the lease.
func (c *leaseClock) deadline() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.end
}

// endedBy reports whether the lease ended at or before t (settling the clock if
// so), and its end.
func (c *leaseClock) endedBy(t time.Time) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !t.Before(c.end) {
		c.settled = true
	}
	return c.end, c.settled
}

// lostBy records that the lease was lost by t at the latest: the backend said so,
// or Hold gave it up. It returns the end of the lease, and whether the lease was
// lost before it would have expired.
func (c *leaseClock) lostBy(t time.Time) (end time.Time, early bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.settled && t.Before(c.end) {
		c.end = t
		c.early = true
	}
	c.settled = true
	return c.end, c.early
}

// beginRenew reports whether a renewal that starts at start may extend the lease.
func (c *leaseClock) beginRenew(start time.Time) bool {
	_, ended := c.endedBy(start)
	return !ended
}

// renewed records the outcome of a renewal that began before the lease ended:
// replyAt is when its answer came.
func (c *leaseClock) renewed(next distlock.Lease, err error, replyAt time.Time) {
	if errors.Is(err, distlock.ErrNotHeld) {
		c.lostBy(replyAt)
		return
	}
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// The renewal began while the lease was held, and the server found it still
	// held by this token: it was held throughout. Renew never shortens what the
	// server holds, so the later of the two deadlines bounds it.
	if !c.settled && next.Expires.After(c.end) {
		c.end = next.Expires
	}
}

// track returns l with its Renew watched by c, keeping l's LossNotifier (Hold
// looks for it).
func (c *leaseClock) track(l distlock.Locker) distlock.Locker {
	t := &trackedLocker{Locker: l, clock: c}
	if n, ok := l.(distlock.LossNotifier); ok {
		return &trackedNotifier{trackedLocker: t, n: n}
	}
	return t
}

// A trackedLocker is a Locker whose renewals a leaseClock sees.
type trackedLocker struct {
	distlock.Locker
	clock *leaseClock
}

func (t *trackedLocker) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	start := time.Now()
	if !t.clock.beginRenew(start) {
		return distlock.Lease{}, fmt.Errorf("%w: key %q: the lease ended before this renewal began", distlock.ErrNotHeld, lease.Key)
	}
	next, err := t.Locker.Renew(ctx, lease, ttl)
	t.clock.renewed(next, err, time.Now())
	return next, err
}

// A trackedNotifier is a trackedLocker whose Locker reports losses.
type trackedNotifier struct {
	*trackedLocker
	n distlock.LossNotifier
}

func (t *trackedNotifier) Lost(lease distlock.Lease) <-chan struct{} { return t.n.Lost(lease) }
