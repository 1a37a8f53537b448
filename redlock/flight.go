package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock"
)

// flights lets one attempt per key of a Locker be in flight at a time. Many
// TryLocks of one key through one Locker (a herd of waiters, woken or starting
// together) would otherwise each run a round on every master at once: hundreds of
// them fill the clients' connection pools, run past the node timeout, fail with
// errors instead of ErrLocked, and distlock.Lock retries them, so the herd never
// parks. A TryLock that finds an attempt of its key in flight waits for it instead,
// and then:
//   - the attempt acquired the key: the key was held (by this Locker's other
//     caller) during this call, which returns ErrLocked without a round trip;
//   - the attempt began after this call did and found the key held by others:
//     that observation was made during this call too, which returns it;
//   - otherwise (an older attempt, or one that failed for another reason) it makes
//     an attempt of its own, or waits for the next one.
type flights struct {
	mu sync.Mutex
	m  map[string]*flight
}

// A flight is one attempt in flight.
type flight struct {
	began time.Time
	done  chan struct{} // made when a second caller waits for the attempt
	err   error         // the attempt's outcome, set before done closes
}

// errHeldBySelf is the outcome of a TryLock that waited for an attempt of its
// Locker that acquired the key.
var errHeldBySelf = fmt.Errorf("%w: by a TryLock of this Locker that acquired it during this call", distlock.ErrLocked)

// run runs attempt unless an attempt of key is in flight (see flights); began is
// when the TryLock began.
func (fs *flights) run(ctx context.Context, key string, began time.Time, attempt func() (distlock.Lease, error)) (distlock.Lease, error) {
	for {
		fs.mu.Lock()
		f, busy := fs.m[key]
		if !busy {
			if fs.m == nil {
				fs.m = make(map[string]*flight)
			}
			f = &flight{began: time.Now()}
			fs.m[key] = f
			fs.mu.Unlock()
			lease, err := attempt()
			fs.mu.Lock()
			delete(fs.m, key)
			f.err = err
			if f.done != nil {
				close(f.done)
			}
			fs.mu.Unlock()
			return lease, err
		}
		if f.done == nil {
			f.done = make(chan struct{})
		}
		fs.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return distlock.Lease{}, ctx.Err()
		}
		switch {
		case f.err == nil:
			return distlock.Lease{}, errHeldBySelf
		case errors.Is(f.err, distlock.ErrLocked) && !f.began.Before(began):
			return distlock.Lease{}, f.err
		}
	}
}
