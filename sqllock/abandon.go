package sqllock

import (
	"context"
	"errors"
	"time"

	"github.com/distlock/distlock/sqllock/sqldialect"

	"github.com/distlock/distlock/driver"
)

// An acquire whose outcome is unknown (the caller's deadline passed, the connection
// broke) may have committed, or may still be on its way: held up in a socket buffer
// or the network, it can reach the database after the driver closed the connection
// and commit then (the database reads what was sent before the close). A cleanup
// that releases the token's row once cannot see a statement that has not arrived.
// So the Locker first ends the database session the statement was sent on
// (pg_terminate_backend, KILL CONNECTION) and waits until it is gone: a session that
// is gone has committed or rolled back everything it will, and bytes that reach its
// closed socket later are discarded. Only then does it release the row.

// endPollMax is the longest pause between two looks at a session being ended.
const endPollMax = 100 * time.Millisecond

// endSession ends sess and waits until it is gone, retrying while it is still
// there or the database cannot be reached, until ctx ends or the database refuses.
func (r *rows) endSession(ctx context.Context, sess sqldialect.Session) error {
	for attempt := 1; ; attempt++ {
		err := r.d.EndSession(ctx, sess)
		if err == nil || errors.Is(err, sqldialect.ErrCannotEnd) {
			return err
		}
		if perr := driver.Pause(ctx, attempt, endPollMax); perr != nil {
			return errors.Join(err, perr)
		}
	}
}
