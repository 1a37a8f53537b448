package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/distlock/distlock"
)

// step makes one call of client i, chosen by rnd.
func (x *explorer) step(i int, rnd *rand.Rand) {
	c := x.client(i)
	key := x.keys[rnd.IntN(len(x.keys))]
	ctx, cancel := context.WithTimeout(x.t.Context(), x.deadline(rnd))
	defer cancel()
	switch n := rnd.IntN(100); {
	case n < 3:
		x.abandon(c, key, rnd)
	case n < 30:
		c.acquired(c.locker.TryLock(ctx, key, x.ttl(rnd)))
	case n < 45:
		if l, ok := c.pick(rnd, false); ok {
			next, err := c.locker.Renew(ctx, l, x.ttl(rnd)) // longer, equal or shorter
			c.renewed(l, next, err)
		}
	case n < 50:
		// A Renew just before Expires races whatever ends the lease then (a loss
		// monitor, a reaper, the server's expiry).
		if l, ok := c.pick(rnd, false); ok {
			sleepCtx(ctx, time.Until(l.Expires)-time.Duration(rnd.Int64N(int64(2*time.Millisecond))))
			next, err := c.locker.Renew(ctx, l, x.ttl(rnd))
			c.renewed(l, next, err)
		}
	case n < 65:
		if l, ok := c.pick(rnd, true); ok {
			_ = c.locker.Unlock(ctx, l)
		}
	case n < 75:
		if l, ok := c.pick(rnd, true); ok {
			x.hold(c, rnd, l)
		}
	case n < 85:
		lctx, lcancel := context.WithTimeout(x.t.Context(), x.s.ttl/2+time.Duration(rnd.Int64N(int64(3*x.s.ttl+2*x.s.waitBound))))
		defer lcancel()
		c.acquired(c.rec.lock(lctx, key, x.ttl(rnd)))
	case n < 92:
		x.invalid(c, ctx, rnd)
	case n < 97:
		if in, ok := c.c.Locker.(distlock.Inspector); ok {
			_, _ = in.Inspect(ctx, key)
		}
	default:
		x.close(i, c)
	}
}

// deadline is a call's context timeout: mostly the op timeout, sometimes short
// enough to end during the call.
func (x *explorer) deadline(rnd *rand.Rand) time.Duration {
	if rnd.IntN(3) == 0 {
		return time.Millisecond + time.Duration(rnd.Int64N(int64(50*time.Millisecond)))
	}
	return x.s.op
}

// abandonTTL is abandon's ttl: four times the clean-up bound (the op timeout).
func (x *explorer) abandonTTL() time.Duration { return max(4*x.s.op, 4*x.s.ttl) }

// ttl is an acquisition's or a Renew's ttl: 1, 2 or 4 times the suite's short
// ttl.
func (x *explorer) ttl(rnd *rand.Rand) time.Duration { return x.s.ttl << rnd.IntN(3) }

// abandon makes a TryLock with a ttl far beyond the clean-up bound under a
// deadline that may end during the call: a half-made lock that the backend leaves
// behind then shows as a key held long after. A lease it does get is given back at
// once.
func (x *explorer) abandon(c *xclient, key string, rnd *rand.Rand) {
	ctx, cancel := context.WithTimeout(x.t.Context(), time.Duration(rnd.Int64N(int64(5*time.Millisecond))))
	l, err := c.locker.TryLock(ctx, key, x.abandonTTL())
	cancel()
	if err == nil {
		uctx, ucancel := context.WithTimeout(x.t.Context(), x.s.op)
		defer ucancel()
		_ = c.locker.Unlock(uctx, l)
	}
}

// acquired notes a lease that an acquisition returned.
func (c *xclient) acquired(l distlock.Lease, err error) {
	if err != nil {
		return
	}
	c.mu.Lock()
	c.leases = append(c.leases, l)
	c.mu.Unlock()
}

// pick returns one of c's leases, taken out of its list when take is set.
func (c *xclient) pick(rnd *rand.Rand, take bool) (distlock.Lease, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.leases) == 0 {
		return distlock.Lease{}, false
	}
	i := rnd.IntN(len(c.leases))
	l := c.leases[i]
	if take {
		c.leases = append(c.leases[:i], c.leases[i+1:]...)
	}
	return l, true
}

// renewed replaces l by next after a Renew, or drops it when it is not held.
func (c *xclient) renewed(l, next distlock.Lease, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, h := range c.leases {
		if h.Token != l.Token {
			continue
		}
		switch {
		case err == nil && next.Expires.After(h.Expires):
			c.leases[i] = next
		case errors.Is(err, distlock.ErrNotHeld):
			c.leases = append(c.leases[:i], c.leases[i+1:]...)
		}
		return
	}
}

// hold holds l with distlock.Hold for a while, then releases it.
func (x *explorer) hold(c *xclient, rnd *rand.Rand, l distlock.Lease) {
	ttl := max(l.Remaining(), x.s.ttl)
	start := time.Now()
	h := distlock.Hold(x.t.Context(), c.locker, l, &distlock.HoldOptions{TTL: ttl})
	context.AfterFunc(h.Context(), func() { c.rec.heldEnd(h.Lease(), start, time.Now()) })
	sleepCtx(h.Context(), time.Duration(rnd.Int64N(int64(3*x.s.ttl))))
	ctx, cancel := context.WithTimeout(x.t.Context(), x.deadline(rnd))
	defer cancel()
	_ = h.Release(ctx)
}

// invalid makes a call with a bad argument, which must give ErrInvalid (rule 7).
func (x *explorer) invalid(c *xclient, ctx context.Context, rnd *rand.Rand) {
	var err error
	var what string
	switch rnd.IntN(4) {
	case 3:
		x.cancelled(c, rnd)
		return
	case 0:
		what = "TryLock with ttl 0"
		_, err = c.c.Locker.TryLock(ctx, x.keys[0], 0)
	case 1:
		what = "TryLock of an empty key"
		_, err = c.c.Locker.TryLock(ctx, "", x.s.ttl)
	default:
		what = "Renew of a zero Lease"
		_, err = c.c.Locker.Renew(ctx, distlock.Lease{}, x.s.ttl)
	}
	if errors.Is(err, distlock.ErrClosed) || c.isGone() {
		return // a crashed client is not used after its crash
	}
	if !errors.Is(err, distlock.ErrInvalid) {
		x.fail(Violation{Rule: rInput, What: fmt.Sprintf("%s: got %v, want an error wrapping ErrInvalid", what, err)})
	}
	var oe *distlock.OpError
	if err != nil && !errors.As(err, &oe) {
		x.fail(Violation{Rule: rErrors, What: fmt.Sprintf("%s returned %T (%v), want a *distlock.OpError", what, err, err)})
	}
}

// close closes client i's Locker, when it has Close, and replaces the client.
func (x *explorer) close(i int, c *xclient) {
	cl, ok := c.c.Locker.(closer)
	if !ok || x.noClose {
		return
	}
	if !c.markGone() {
		return
	}
	inv := time.Now()
	err := cl.Close()
	c.rec.closed(OpClose, inv, time.Now(), err)
	x.replace(i, c)
}

// cancelled makes a TryLock with a context already cancelled: it must fail with
// the context's error, not ErrLocked, and lock nothing (rule 6).
func (x *explorer) cancelled(c *xclient, rnd *rand.Rand) {
	ctx, cancel := context.WithCancel(x.t.Context())
	cancel()
	key := x.keys[rnd.IntN(len(x.keys))]
	l, err := c.locker.TryLock(ctx, key, x.s.ttl)
	switch {
	case err != nil && c.isGone():
		// a crashed client is not used after its crash
	case err == nil:
		x.fail(Violation{Rule: rContext, What: fmt.Sprintf("TryLock(%s) with a cancelled context succeeded (fence %d)", short(key), l.Fence)})
		uctx, ucancel := context.WithTimeout(x.t.Context(), x.s.op)
		defer ucancel()
		_ = c.locker.Unlock(uctx, l)
	case errors.Is(err, distlock.ErrClosed):
	case !errors.Is(err, context.Canceled):
		x.fail(Violation{Rule: rContext, What: fmt.Sprintf("TryLock(%s) with a cancelled context: got %v, want an error wrapping context.Canceled", short(key), err)})
	}
}

// markGone marks c closed or crashed; it reports false when it was already.
func (c *xclient) markGone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone {
		return false
	}
	c.gone = true
	return true
}

// isGone reports whether c was closed or crashed.
func (c *xclient) isGone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gone
}
