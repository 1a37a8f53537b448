package sqllock

import (
	"context"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/sqllock/internal/calls"
)

// Inspect returns the current holder of key, or an error wrapping
// distlock.ErrNotHeld when key is free. Holder.Expires is the local time at which the
// row expires by the database's clock, estimated from a time taken before the query.
func (l *Locker) Inspect(ctx context.Context, key string) (distlock.Holder, error) {
	start := time.Now()
	cctx, end, err := l.calls.Begin(ctx)
	if err != nil {
		return distlock.Holder{}, l.opError("Inspect", key, err)
	}
	defer end()
	st, err := l.inspect(cctx, key)
	if err != nil {
		return distlock.Holder{}, l.opError("Inspect", key, calls.Err(cctx, err))
	}
	return distlock.Holder{Key: key, Fence: uint64(st.Fence), Expires: start.Add(st.Remaining), Owner: st.Owner}, nil
}

func (l *Locker) inspect(ctx context.Context, key string) (RowState, error) {
	if err := driver.ValidateKey(key, MaxKeyLen); err != nil {
		return RowState{}, err
	}
	if err := ctx.Err(); err != nil {
		return RowState{}, err
	}
	r := row(key, "")
	var st RowState
	var found bool
	err := l.retry(ctx, func() error {
		var err error
		st, found, err = l.d.Inspect(ctx, r)
		return err
	})
	if err != nil {
		return RowState{}, err
	}
	if !found {
		return RowState{}, distlock.ErrNotHeld
	}
	return st, nil
}
