package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/redisx"
)

// Inspect returns the current holder of key: its fence, its owner label and, as
// Expires, the time taken before the request was sent plus the lock's remaining
// time to live on the server (PTTL). It returns an error wrapping
// distlock.ErrNotHeld when key is free.
func (l *Locker) Inspect(ctx context.Context, key string) (distlock.Holder, error) {
	if err := l.group.Enter(); err != nil {
		return distlock.Holder{}, opError("Inspect", key, err)
	}
	defer l.group.Leave()
	h, err := l.inspect(ctx, key)
	if err != nil {
		return distlock.Holder{}, opError("Inspect", key, err)
	}
	return h, nil
}

func (l *Locker) inspect(ctx context.Context, key string) (distlock.Holder, error) {
	if err := driver.ValidateKey(key, MaxKeyLen); err != nil {
		return distlock.Holder{}, err
	}
	n := l.names(key)
	start := time.Now()
	v, err := redisx.Call(ctx, l.group, func() ([]any, error) {
		return l.node.Run(ctx, inspectScript, []string{n.Lock, n.Fence}).Slice()
	}, nil)
	if errors.Is(err, redis.Nil) {
		return distlock.Holder{}, fmt.Errorf("key is free: %w", distlock.ErrNotHeld)
	}
	if err != nil {
		return distlock.Holder{}, err
	}
	if len(v) != 3 {
		return distlock.Holder{}, fmt.Errorf("unexpected reply %#v from the inspect script", v)
	}
	fs, _ := v[0].(string)
	owner, _ := v[1].(string)
	pttl, _ := v[2].(int64)
	fence, _ := strconv.ParseUint(fs, 10, 64)
	h := distlock.Holder{Key: key, Fence: fence, Owner: owner}
	switch {
	case pttl >= 0:
		h.Expires = start.Add(time.Duration(pttl) * time.Millisecond)
	case pttl == -2: // expired between GET and PTTL: cannot happen inside a script
		return distlock.Holder{}, fmt.Errorf("key is free: %w", distlock.ErrNotHeld)
	}
	return h, nil
}
