// Package calls holds what the SQL dialects share: the conversion of a ttl to the
// databases' units (Micros) and the split of a queue of operations into the next
// batch (Batch), and names for package driver's call lifecycle (Group) and retries
// (Retry).
package calls

import (
	"context"
	"slices"
	"time"

	"github.com/distlock/distlock/driver"
)

// Group is the call lifecycle of package driver, which every Locker shares.
type Group = driver.Calls

// New returns a Group that is open.
func New() *Group { return driver.NewCalls() }

// Err is driver.Err.
func Err(cctx context.Context, err error) error { return driver.Err(cctx, err) }

// Retry is driver.Retry: the one retry schedule.
func Retry(ctx context.Context, retryable func(error) bool, op func() error) error {
	return driver.Retry(ctx, retryable, op)
}

// Micros returns d in whole microseconds, rounded up, so that a row never expires
// before the lease's local Expires.
func Micros(d time.Duration) int64 {
	us := d / time.Microsecond
	if d%time.Microsecond != 0 {
		us++
	}
	return int64(us)
}

// Batch splits queue into the next batch (in queue order, at most max, no two
// that same says are one: two operations on one lease) and the rest, which
// wait for a later batch.
func Batch[T any](queue []T, max int, same func(a, b T) bool) (batch, rest []T) {
	for _, o := range queue {
		if len(batch) < max && !slices.ContainsFunc(batch, func(p T) bool { return same(p, o) }) {
			batch = append(batch, o)
		} else {
			rest = append(rest, o)
		}
	}
	return batch, rest
}
