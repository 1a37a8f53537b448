package gocronlock

import (
	"context"
	"sync"
	"time"

	"github.com/distlock/distlock"
)

// A run is one run of a job under its lease: the gocron.Lock that Lock returns.
type run struct {
	lk       *Locker
	key      string // gocron's key
	held     *distlock.Held
	acquired time.Time
	// ctx is the job's view of the run (Locker.Context): it ends when the lease is
	// lost, at Unlock or at Close.
	ctx context.Context
	end context.CancelCauseFunc
	// stopLost stops the OnLost watcher, which closes lostDone when it has run.
	stopLost func() bool
	lostDone chan struct{}

	once sync.Once
	err  error // Unlock's result
}

// start holds lease for a run of key; the renewals keep ctx's values.
func (lk *Locker) start(ctx context.Context, key string, lease distlock.Lease) *run {
	h := distlock.Hold(ctx, lk.l, lease, &distlock.HoldOptions{TTL: lk.o.TTL, Every: lk.o.Every, Observer: lk.o.Observer})
	rctx, end := context.WithCancelCause(h.Context())
	r := &run{lk: lk, key: key, held: h, acquired: time.Now(), ctx: rctx, end: end}
	if f := lk.o.OnLost; f != nil {
		r.lostDone = make(chan struct{})
		r.stopLost = context.AfterFunc(h.Context(), func() {
			defer close(r.lostDone)
			if err := h.Err(); err != nil {
				f(key, err)
			}
		})
	}
	return r
}

// Unlock ends the run: the job's Context ends, and the lease is released, at once
// when MinHold has passed since it was acquired, else in the background when it
// passes (Unlock then returns nil at once). It returns the loss (wrapping
// distlock.ErrNotHeld) when the lease was lost while the job ran, else the
// release's error. gocron calls it when the job returns; a second call returns
// the first result.
func (r *run) Unlock(ctx context.Context) error {
	r.once.Do(func() {
		lk := r.lk
		lost := r.settleLost()
		r.end(errRunEnded)
		lk.forget(r)
		if wait := lk.untilMinHold(r.acquired); lost == nil && wait > 0 {
			go r.releaseAfter(wait)
			return
		}
		defer lk.wg.Done()
		r.err = r.release(ctx)
	})
	return r.err
}

// settleLost stops the OnLost watcher and returns the loss, if the lease was lost.
// It makes sure that OnLost is called once for a loss that came before: the
// watcher may have been triggered but not started yet (the context that the job
// watches can end, and the job return, before the watcher's context is
// cancelled), and stopping it then cancels the call, so settleLost makes it.
func (r *run) settleLost() error {
	if r.stopLost == nil {
		return r.held.Err()
	}
	stopped := r.stopLost()
	if !stopped {
		<-r.lostDone // it ran, or runs now: it reports the loss itself
	}
	lost := r.held.Err()
	if stopped && lost != nil {
		r.lk.o.OnLost(r.key, lost)
	}
	return lost
}

// release releases the lease with a bounded context that lives even when ctx ended.
func (r *run) release(ctx context.Context) error {
	rctx, cancel := r.lk.releaseCtx(ctx)
	defer cancel()
	return r.held.Release(rctx)
}

// releaseAfter keeps the lease (renewed) for wait more, then releases it.
func (r *run) releaseAfter(wait time.Duration) {
	defer r.lk.wg.Done()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.held.Context().Done(): // lost meanwhile: nothing left to keep
	}
	_ = r.release(context.Background())
}

// close ends a run whose job has not returned, for Locker.Close: Unlock then
// returns the closed error.
func (r *run) close() {
	r.once.Do(func() {
		defer r.lk.wg.Done()
		r.err = r.lk.closedErr(r.key)
		_ = r.settleLost()
		r.end(r.err)
		r.lk.forget(r)
		_ = r.release(context.Background())
	})
}

// finish ends a run that Lock did not hand out (the Locker was closed meanwhile).
func (r *run) finish(err error) {
	r.once.Do(func() {
		r.err = err
		_ = r.settleLost()
		r.end(err)
		_ = r.release(context.Background())
	})
}
