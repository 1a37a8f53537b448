package redisx

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock"
)

// A Waiting is the state of one Wait that both backends share: whether it saw the
// key held and, if so, until when the holder's time to live surely lasts. Every
// phase of a Wait selects on Bound, so that no phase (not even the wait for a
// subscription that a dead connection never confirms) outlasts the holder's ttl
// once it is known.
type Waiting struct {
	ctx   context.Context
	held  bool
	timer *time.Timer
	// Bound fires when the holder's time to live has surely ended; it is nil (never
	// ready) until the key was seen held.
	Bound <-chan time.Time
}

// NewWaiting returns the state of a Wait with context ctx. Call Stop when done.
func NewWaiting(ctx context.Context) *Waiting { return &Waiting{ctx: ctx} }

// HeldUntil records that the key was seen held, at most until until (a later read
// replaces an earlier one: the holder may have renewed).
func (w *Waiting) HeldUntil(until time.Time) {
	w.held = true
	d := time.Until(until)
	if w.timer == nil {
		w.timer = time.NewTimer(d)
		w.Bound = w.timer.C
		return
	}
	w.timer.Reset(d)
}

// Held reports whether the key was seen held.
func (w *Waiting) Held() bool { return w.held }

// GaveUp is the error of a Wait whose context ended: errors.Join(ErrLocked,
// ctx.Err()) once the key was seen held, else ctx's error alone (the Wait cannot
// tell contention from a server it did not reach).
func (w *Waiting) GaveUp() error {
	if w.held {
		return errors.Join(distlock.ErrLocked, w.ctx.Err())
	}
	return fmt.Errorf("gave up before the key was seen held: %w", w.ctx.Err())
}

// Stop releases the timer.
func (w *Waiting) Stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}
