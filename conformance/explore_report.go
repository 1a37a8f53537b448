package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/distlock/distlock"
)

// finish gives every key back, checks that each can be acquired again, checks the
// history, and reports.
func (x *explorer) finish() {
	x.release()
	x.liveness()
	b := Bounds{Ctx: x.s.ctxBound, Clock: schedAllowance, Grace: x.s.grace, Session: x.s.h.Caps.SessionExpiry,
		Recovery: x.s.faultTimeout + 4*x.s.ttl + x.s.grace, Cleanup: x.s.op + x.s.ctxBound}
	if _, ok := x.client(0).c.Locker.(distlock.Waiter); ok {
		b.Wait = x.s.waitBound + x.s.ctxBound
	}
	h := x.hist.events()
	vs := append(Check(h, b), x.broken...)
	if len(vs) == 0 {
		x.t.Logf("explore: seed %d: %d calls, no violation", x.o.Seed, len(h))
		return
	}
	x.report(h, vs)
}

// release unlocks what every live client still holds and closes it, so that a
// session backend's keys go too.
func (x *explorer) release() {
	for i := range x.o.Clients {
		c := x.client(i)
		c.mu.Lock()
		leases := c.leases
		c.leases = nil
		c.mu.Unlock()
		for _, l := range leases {
			ctx, cancel := context.WithTimeout(x.t.Context(), x.s.op)
			_ = c.locker.Unlock(ctx, l)
			cancel()
		}
		if cl, ok := c.c.Locker.(closer); ok && !x.noClose {
			inv := time.Now()
			err := cl.Close()
			c.rec.closed(OpClose, inv, time.Now(), err)
		}
	}
}

// liveness: once the faults have healed and every lease was given back, a fresh
// client acquires each key within the longest ttl (a half-made lock whose bounded
// clean-up gave up during a fault lapses by it) plus grace plus the fault timeout.
func (x *explorer) liveness() {
	c := x.newClient()
	bound := x.abandonTTL() + x.s.grace + x.s.faultTimeout
	for _, key := range x.keys {
		deadline := time.Now().Add(bound)
		var err error
		for {
			ctx, cancel := context.WithTimeout(x.t.Context(), x.s.op)
			var l distlock.Lease
			l, err = c.locker.TryLock(ctx, key, x.s.ttl)
			cancel()
			if err == nil {
				ctx, cancel := context.WithTimeout(x.t.Context(), x.s.op)
				_ = c.locker.Unlock(ctx, l)
				cancel()
				break
			}
			if time.Now().After(deadline) || errors.Is(err, distlock.ErrInvalid) || x.t.Context().Err() != nil {
				x.fail(Violation{Rule: rExpiry, What: fmt.Sprintf("liveness: key %s could not be acquired within %v after the faults healed and every holder gave it back or closed: %v", short(key), bound, err)})
				break
			}
			sleepCtx(x.t.Context(), 20*time.Millisecond)
		}
	}
}

// maxShown bounds the violations a failure shows.
const maxShown = 5

// report writes the history and fails the test with the violations.
func (x *explorer) report(h []Event, vs []Violation) {
	path := filepath.Join(x.o.HistoryDir, fmt.Sprintf("distlock-explore-%s-%d.jsonl", strings.NewReplacer("/", "_", " ", "_").Replace(x.t.Name()), x.o.Seed))
	werr := writeHistoryFile(path, h)
	for i, v := range vs {
		if i == maxShown {
			x.t.Errorf("... and %d more violations", len(vs)-maxShown)
			break
		}
		var b strings.Builder
		for _, e := range v.Events {
			fmt.Fprintf(&b, "\n\t%s", e)
		}
		x.t.Errorf("%s%s", v, b.String())
	}
	where := "history written to " + path
	if werr != nil {
		where = "history not written: " + werr.Error()
	}
	x.t.Errorf("explore: seed %d: %d violations in %d calls; replay the schedule with -conformance.seed=%d; %s", x.o.Seed, len(vs), len(h), x.o.Seed, where)
}

func writeHistoryFile(path string, h []Event) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteHistory(f, h); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// String shows e on one line: client, op, key, times in ms, lease and outcome.
func (e Event) String() string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }
	s := fmt.Sprintf("[%s..%s] client %d %s", ms(e.Invoke), ms(e.Return), e.Client, e.Op)
	if e.Key != "" {
		s += " " + short(e.Key)
	}
	if e.TTL > 0 {
		s += " ttl=" + e.TTL.String()
	}
	if e.Deadline > 0 {
		s += " deadline=" + e.Deadline.String()
	}
	if e.Fence != 0 {
		s += fmt.Sprintf(" fence=%d", e.Fence)
	}
	if e.Expires != 0 {
		s += " expires=" + ms(e.Expires)
	}
	if e.Outcome != "" || e.Err != "" {
		s += " -> " + e.Outcome + " " + e.Err
	} else {
		s += " -> ok"
	}
	return s
}
