package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/redisx"
)

// Inspect returns the current holder of key: its fence, its owner label and, as
// Expires, the time taken before the request was sent plus the lock's remaining
// time to live on the server (PTTL). It returns an error wrapping
// distlock.ErrNotHeld when key is free.
func (l *Locker) Inspect(ctx context.Context, key string) (distlock.Holder, error) {
	if err := l.checkKey(key); err != nil {
		return distlock.Holder{}, err
	}
	n := l.names(key)
	start := time.Now()
	v, err := call(ctx, &l.workers, func() ([]any, error) {
		return redisx.Run(ctx, l.client, inspectScript, evalRetry, []string{n.lock, n.fence}).Slice()
	}, nil)
	if errors.Is(err, redis.Nil) {
		return distlock.Holder{}, fmt.Errorf("redislock: Inspect of key %s: key is free: %w", showKey(key), distlock.ErrNotHeld)
	}
	if err != nil {
		return distlock.Holder{}, fmt.Errorf("redislock: Inspect of key %s: %w", showKey(key), err)
	}
	if len(v) != 3 {
		return distlock.Holder{}, fmt.Errorf("redislock: Inspect of key %s: unexpected reply %#v", showKey(key), v)
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
		return distlock.Holder{}, fmt.Errorf("redislock: Inspect of key %s: key is free: %w", showKey(key), distlock.ErrNotHeld)
	}
	return h, nil
}
