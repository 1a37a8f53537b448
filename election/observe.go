package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/keytext"
)

// A Leader is an election's current leader, as the Locker's distlock.Inspector
// reports it. The zero Leader means no leader.
type Leader struct {
	// Term is the leader's term (its lease's Fence, Leadership.Term).
	Term uint64
	// Owner is the owner label of the leader's Locker (the backend's
	// Options.Owner; memlock reports memlock.Owner), if the backend keeps one.
	Owner string
	// Expires is a local estimate of when the leader's lease ends unless renewed.
	Expires time.Time
}

// IsZero reports whether l is the zero Leader (no leader).
func (l Leader) IsZero() bool { return l == Leader{} }

// inspector returns the Locker as an Inspector, or an error wrapping
// errors.ErrUnsupported.
func (e *Election) inspector() (distlock.Inspector, error) {
	in, ok := e.l.(distlock.Inspector)
	if !ok {
		return nil, fmt.Errorf("election %s: %T is not a distlock.Inspector, so it cannot report the leader: %w",
			keytext.Quote(e.key), e.l, errors.ErrUnsupported)
	}
	return in, nil
}

// Leader returns the current leader, or an error wrapping ErrNoLeader (and
// distlock.ErrNotHeld) when there is none. It needs a Locker that is a
// distlock.Inspector; with another it returns an error wrapping
// errors.ErrUnsupported.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	in, err := e.inspector()
	if err != nil {
		return Leader{}, err
	}
	h, err := in.Inspect(ctx, e.key)
	switch {
	case errors.Is(err, distlock.ErrNotHeld):
		return Leader{}, fmt.Errorf("election %s: %w", keytext.Quote(e.key), ErrNoLeader)
	case err != nil:
		return Leader{}, fmt.Errorf("election %s: leader: %w", keytext.Quote(e.key), err)
	}
	return Leader{Term: h.Fence, Owner: h.Owner, Expires: h.Expires}, nil
}

// Observe reports the leader as it changes, on the returned channel: first the
// current one (the zero Leader when there is none), then every new leader (a new
// Term) and the zero Leader whenever the election has none. The channel is closed
// when ctx ends. Only the latest value matters: a slow reader may miss a short
// term. Observe asks with Leader's Inspect every Options.Poll, and sooner when the
// Locker's distlock.Waiter says that the leader's key may be free (a resignation
// is then reported at once); a failed Inspect is tried again after Poll. It needs
// a Locker that
// is a distlock.Inspector, else it returns an error wrapping errors.ErrUnsupported
// (and no channel).
func (e *Election) Observe(ctx context.Context) (<-chan Leader, error) {
	in, err := e.inspector()
	if err != nil {
		return nil, err
	}
	ch := make(chan Leader)
	go e.observe(ctx, in, ch)
	return ch, nil
}

func (e *Election) observe(ctx context.Context, in distlock.Inspector, ch chan<- Leader) {
	defer close(ch)
	w, _ := e.l.(distlock.Waiter)
	// A loop turn takes at least minGap, in case a Wait returns at once while the
	// leader stays (a backend whose Wait only bounds itself by the ttl).
	minGap := min(e.o.Poll/10, 50*time.Millisecond)
	var last Leader
	sent := false
	for {
		began := time.Now()
		h, err := in.Inspect(ctx, e.key)
		known := err == nil || errors.Is(err, distlock.ErrNotHeld)
		var cur Leader
		if err == nil {
			cur = Leader{Term: h.Fence, Owner: h.Owner, Expires: h.Expires}
		}
		if known && (!sent || cur.Term != last.Term || cur.IsZero() != last.IsZero()) {
			select {
			case ch <- cur:
			case <-ctx.Done():
				return
			}
			sent = true
		}
		if known {
			last = cur
		}
		pause := e.o.Poll
		if known && !cur.IsZero() {
			if w != nil {
				// Bounded by Poll: a new leader that took the key before Wait
				// looked would keep it waiting for that leader's release.
				wctx, cancel := context.WithTimeout(ctx, e.o.Poll)
				werr := w.Wait(wctx, e.key)
				cancel()
				if werr == nil || errors.Is(werr, distlock.ErrLocked) {
					pause = minGap - time.Since(began) // freed, or the bound passed
				}
			} else {
				pause = min(pause, max(time.Until(cur.Expires), 0)+time.Millisecond)
			}
		}
		if !sleep(ctx, pause) {
			return
		}
	}
}

// sleep waits for d (returning at once when d <= 0) and reports whether ctx is
// still alive.
func sleep(ctx context.Context, d time.Duration) bool {
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return ctx.Err() == nil
}
