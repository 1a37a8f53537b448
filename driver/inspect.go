package driver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock"
)

// Inspect returns the current holder of key, or an error wrapping
// distlock.ErrNotHeld when key is free. Holder.Expires is estimated from a time
// taken before the request. A Driver that is not an Inspector makes it return an
// error wrapping errors.ErrUnsupported.
func (l *Locker) Inspect(ctx context.Context, key string) (distlock.Holder, error) {
	start := time.Now()
	cctx, end, err := l.calls.Begin(ctx)
	if err != nil {
		return distlock.Holder{}, l.opError("Inspect", key, err)
	}
	defer end()
	h, err := l.inspect(cctx, key, start)
	if err != nil {
		return distlock.Holder{}, l.opError("Inspect", key, Err(cctx, err))
	}
	return h, nil
}

func (l *Locker) inspect(ctx context.Context, key string, start time.Time) (distlock.Holder, error) {
	in, ok := l.d.(Inspector)
	if !ok {
		return distlock.Holder{}, fmt.Errorf("%s cannot inspect: %w", l.c.Backend, errors.ErrUnsupported)
	}
	if err := ValidateKey(key, l.c.MaxKeyLen); err != nil {
		return distlock.Holder{}, err
	}
	if err := ctx.Err(); err != nil {
		return distlock.Holder{}, err
	}
	var h distlock.Holder
	var left time.Duration
	err := l.retry(ctx, func() error {
		var err error
		h, left, err = in.Inspect(ctx, key)
		return err
	})
	if err != nil {
		return distlock.Holder{}, err
	}
	h.Key = key
	h.Expires = start.Add(left)
	return h, nil
}
