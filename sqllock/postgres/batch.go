package postgres

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/sqllock/sqldialect"
)

// Acquires shared by concurrent callers.
//
// A Locker's TryLocks run at most maxFlights round trips at a time, through a
// driver.Batcher: a TryLock that finds a round trip free runs its own statement; one
// that finds none free queues, and when a round trip ends, the acquires queued
// meanwhile go as one pipeline of their statements (batchsql.go): one round trip
// and one transaction (one commit) for all of them, on a context that ends only
// when every caller of the batch has given up. Each caller still gets the result
// of its own statement. Releases share round trips the same way, through a
// Batcher of their own: an Unlock never queues behind TryLocks.

// maxFlights is the number of a Locker's acquire round trips in flight at once,
// and of its release round trips: one of each, so that the calls that come
// meanwhile share the next one. A round trip in flight for longer than stallAfter
// (a row lock held by a long transaction, a slow link) stops counting, so that it
// holds up the Locker's other calls no longer than that. maxBatch bounds the
// calls of one batch.
const (
	maxFlights = 1
	stallAfter = 20 * time.Millisecond
	maxBatch   = 256
)

// A call is one TryLock's acquire. Its batch sets res, then closes done, also
// after its caller has left (the clean-up of a caller that left reads it).
type call struct {
	r    rowArgs
	res  result
	done chan struct{}
}

// rowArgs are what an acquire needs of one call.
type rowArgs struct {
	hash, key, token []byte
	us               int64 // ttl in microseconds
}

// result is the outcome of one acquire.
type result struct {
	fence int64 // > 0 won, 0 held
	err   error
	// known is false when err leaves the call's outcome unknown (the batch's
	// statement may have committed): then sess is the batch's session.
	known bool
	sess  sqldialect.Session
}

// newAcquires returns the Batcher of d's acquires: at most flights round trips in
// flight, each counting for stall at most.
func (d *dialect) newAcquires(flights int, stall time.Duration) *driver.Batcher[*call, struct{}] {
	return driver.NewBatcher(d.sendAcquires, driver.BatchOptions[*call]{
		MaxInFlight: flights, MaxBatch: maxBatch, Stall: stall, Go: d.batches.Go,
		Inline: true, // pgx returns once its context is done
	})
}

// newReleases returns the Batcher of d's releases, with the same bounds as the
// acquires'.
func (d *dialect) newReleases(flights int, stall time.Duration) *driver.Batcher[sqldialect.Row, bool] {
	return driver.NewBatcher(d.sendReleases, driver.BatchOptions[sqldialect.Row]{
		MaxInFlight: flights, MaxBatch: maxBatch, Stall: stall, Go: d.batches.Go,
		Inline: true, // pgx returns once its context is done
	})
}

// sendAcquires runs the acquires of cs: one alone on a connection of its own, more
// as one pipeline, in key_hash order (a batch takes its rows in one order, as every
// other batch does, of this Locker or another).
func (d *dialect) sendAcquires(ctx context.Context, cs []*call) ([]struct{}, error) {
	if len(cs) == 1 {
		cs[0].res = d.acquireAlone(ctx, cs[0].r)
	} else {
		sorted := slices.Clone(cs)
		slices.SortFunc(sorted, func(x, y *call) int { return bytes.Compare(x.r.hash, y.r.hash) })
		d.runBatch(ctx, sorted)
	}
	for _, c := range cs {
		close(c.done)
	}
	return make([]struct{}, len(cs)), nil
}

// handles names, by a negative Session.ID, the calls whose callers left while
// their batch ran (Dialect.Acquire returned the handle as the statement's session),
// until the cleanup's EndSession has waited for the batch.
type handles struct {
	mu    sync.Mutex
	last  int64
	calls map[int64]*call
}

// add returns the session that names c.
func (h *handles) add(c *call) sqldialect.Session {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls == nil {
		h.calls = make(map[int64]*call)
	}
	h.last++
	h.calls[h.last] = c
	return sqldialect.Session{ID: -h.last}
}

// take removes and returns the call that s names (nil if none).
func (h *handles) take(s sqldialect.Session) *call {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.calls[-s.ID]
	delete(h.calls, -s.ID)
	return c
}

// endBatch is EndSession of the session that names a call whose caller left while
// its batch ran: it waits until the batch has ended (its goroutine runs nothing
// more for the call after that), then, when the call's outcome is unknown, ends
// the batch's session and waits until it is gone. The handle is used once: a
// later call finds nothing to wait for.
func (d *dialect) endBatch(ctx context.Context, s sqldialect.Session) error {
	c := d.gaveUp.take(s)
	if c == nil {
		return nil
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if c.res.known || c.res.sess.ID == 0 {
		return nil
	}
	for attempt := 1; ; attempt++ {
		err := d.EndSession(ctx, c.res.sess)
		if err == nil || errors.Is(err, sqldialect.ErrCannotEnd) {
			return err
		}
		if perr := driver.Pause(ctx, attempt, endBatchMaxPause); perr != nil {
			return errors.Join(err, perr)
		}
	}
}

// endBatchMaxPause caps the pause between endBatch's attempts to end a session.
const endBatchMaxPause = 100 * time.Millisecond
