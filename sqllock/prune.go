package sqllock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock/sqllock/sqldialect"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// pruneBatch is how many rows one transaction of Prune deletes at most, so that
// the acquisitions it holds up (see Prune) wait for one short transaction at a
// time.
const pruneBatch = 1000

// Prune deletes the rows of keys that have been free for longer than olderThan (by
// the database's clock), and returns how many it deleted. Rows are otherwise never
// deleted, so a table whose keys change (a key per user, per job run) grows without
// bound; call Prune now and then (a daily job with olderThan of a day, say) to keep
// it small.
//
// A pruned key keeps its fencing order: before it deletes rows, Prune raises the
// table's fence high-water mark (a row of its own, see the package doc) to at least
// their fences, in the same transaction, and a key's new row starts its fence
// above that mark. So fences still increase for a key that was pruned and is
// acquired again, as long as every process that uses the table runs a version of
// this package that has Prune (an older one starts new rows at fence 1).
//
// Prune works in batches of up to 1000 rows, each its own transaction, which holds
// the high-water row locked: TryLocks on the table wait for that transaction (not
// Renew, Unlock or Inspect). A held key is never pruned, and neither is a key whose
// lease ended less than olderThan ago; olderThan must not be negative. When ctx
// ends, Prune returns what it deleted so far and the error.
func (l *Locker) Prune(ctx context.Context, olderThan time.Duration) (int64, error) {
	cctx, end, err := l.calls.Begin(ctx)
	if err != nil {
		return 0, l.opError("Prune", "", err)
	}
	defer end()
	n, err := l.prune(cctx, olderThan)
	if err != nil {
		return n, l.opError("Prune", "", driver.Err(cctx, err))
	}
	return n, nil
}

func (l *Locker) prune(ctx context.Context, olderThan time.Duration) (int64, error) {
	if olderThan < 0 {
		return 0, fmt.Errorf("%w: olderThan %v is negative", distlock.ErrInvalid, olderThan)
	}
	after := []byte(sqldialect.HighWaterHash) // the smallest key_hash: every other row is after it
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		var n int64
		var last []byte
		err := l.retry(ctx, func() error {
			var err error
			n, last, err = l.d.Prune(ctx, after, olderThan, pruneBatch)
			return err
		})
		total += n
		if err != nil || last == nil {
			return total, err
		}
		after = last
	}
}
