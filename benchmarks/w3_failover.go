package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RunW3 runs cfg.W3Trials failovers, each on its own key (keyPrefix + the trial).
func RunW3(ctx context.Context, s Subject, cfg Config, keyPrefix string) (r Result) {
	r = newResult(s, W3, 1)
	if !s.Runs(W3) || s.Unavailable != "" {
		return r
	}
	var ds []time.Duration
	for trial := range cfg.W3Trials {
		d, err := failover(ctx, s, fmt.Sprintf("%s%d", keyPrefix, trial))
		if err != nil {
			r.Err = fmt.Sprintf("trial %d: %v", trial, err)
			break
		}
		ds = append(ds, d)
	}
	r.N = len(ds)
	r.fill(ds)
	r.P99 = 0
	return r
}

// failover kills a holder of key and returns how long its waiter took to acquire.
func failover(ctx context.Context, s Subject, key string) (d time.Duration, err error) {
	var cr *crasher
	var route Route
	if s.Networked {
		cr = newCrasher()
		route = cr.route
		defer func() {
			if cerr := cr.close(); cerr != nil && err == nil {
				err = fmt.Errorf("close proxies: %w", cerr)
			}
		}()
	}
	holder, err := s.New(ctx, route)
	if err != nil {
		return 0, fmt.Errorf("new holder: %w", err)
	}
	holderClosed := false
	var held Held
	defer func() {
		if a, ok := held.(abandoner); ok {
			a.Abandon()
		}
		// A killed holder's Close may fail (its connections are gone); only a Close
		// that hangs is an error.
		if !holderClosed {
			if cerr := closeClient(holder); errors.Is(cerr, errCloseTimeout) && err == nil {
				err = fmt.Errorf("close holder: %w", cerr)
			}
		}
	}()
	waiter, err := s.New(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("new waiter: %w", err)
	}
	defer func() {
		if cerr := closeClient(waiter); cerr != nil && err == nil {
			err = fmt.Errorf("close waiter: %w", cerr)
		}
	}()

	if held, err = holder.TryLock(ctx, key); err != nil {
		return 0, fmt.Errorf("holder TryLock: %w", err)
	}
	limit := 15*time.Second + 3*s.Bound
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	type won struct {
		at  time.Time
		h   Held
		err error
	}
	wonc := make(chan won, 1)
	go func() {
		h, err := waiter.Lock(wctx, key)
		wonc <- won{time.Now(), h, err}
	}()

	killed := time.Now()
	if s.Networked {
		cr.cut()
	} else {
		holderClosed = true
		if err := closeClient(holder); errors.Is(err, errCloseTimeout) {
			<-wonc
			return 0, fmt.Errorf("close holder (the kill): %w", err)
		}
	}
	w := <-wonc
	if w.err != nil {
		return 0, fmt.Errorf("waiter Lock (limit %v): %w", limit, w.err)
	}
	d = w.at.Sub(killed)
	if err := unlock(ctx, w.h); err != nil && !errors.Is(err, context.Canceled) {
		return d, fmt.Errorf("waiter Unlock: %w", err)
	}
	return d, nil
}
