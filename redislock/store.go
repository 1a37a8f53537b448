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

// store is a Locker as the driver.Driver of its core: one attempt of each
// operation, each one script (scripts.go). Acquire, Renew and Release go through
// the node's shared queue (redisx.Node.RunShared), so that concurrent calls share
// round trips. A request whose context can end runs on a worker of the Locker's
// Group, so that its caller returns when the context does although go-redis does
// not interrupt a command that waits for its reply; a request whose context only
// Close can end (the core's shared closing context, for context.Background) runs on
// its caller's goroutine.
type store Locker

var (
	_ driver.Driver    = (*store)(nil)
	_ driver.Inspector = (*store)(nil)
	_ driver.Closer    = (*store)(nil)
)

// Renew runs the owner-checked renew script once: it extends the lock to ttl
// unless it has more left, and returns an error wrapping distlock.ErrNotHeld when
// lease's token does not hold it.
func (s *store) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) error {
	l := (*Locker)(s)
	renewed := false
	if redisx.Ours(lease.Token) {
		var err error
		renewed, err = l.node.RenewShared(ctx, l.names(lease.Key).Lock, lease.Token, redisx.Millis(ttl))
		if err != nil {
			return fmt.Errorf("fence %d: %w", lease.Fence, err)
		}
	}
	if !renewed {
		return fmt.Errorf("fence %d: %w", lease.Fence, distlock.ErrNotHeld)
	}
	return nil
}

// Release runs the owner-checked unlock script once: it deletes the lock and
// publishes on the key's release channel, or returns an error wrapping
// distlock.ErrNotHeld when lease's token does not hold it. A release whose caller
// leaves while it waits in the shared queue is sent all the same.
func (s *store) Release(ctx context.Context, lease distlock.Lease) error {
	l := (*Locker)(s)
	released := false
	if redisx.Ours(lease.Token) {
		var err error
		released, err = l.node.ReleaseShared(ctx, l.names(lease.Key), lease.Token)
		if err != nil {
			return fmt.Errorf("fence %d: %w", lease.Fence, err)
		}
	}
	if !released {
		return fmt.Errorf("fence %d: %w", lease.Fence, distlock.ErrNotHeld)
	}
	return nil
}

// Inspect runs inspectScript once: the holder's fence and owner label, and the
// lock's remaining time to live (PTTL).
func (s *store) Inspect(ctx context.Context, key string) (distlock.Holder, time.Duration, error) {
	l := (*Locker)(s)
	n := l.names(key)
	v, err := redisx.Call(ctx, l.group, func() ([]any, error) {
		return l.node.Run(ctx, inspectScript, []string{n.Lock, n.Fence}).Slice()
	})
	if errors.Is(err, redis.Nil) {
		return distlock.Holder{}, 0, fmt.Errorf("key is free: %w", distlock.ErrNotHeld)
	}
	if err != nil {
		return distlock.Holder{}, 0, err
	}
	if len(v) != 3 {
		return distlock.Holder{}, 0, fmt.Errorf("unexpected reply %#v from the inspect script", v)
	}
	fs, _ := v[0].(string)
	owner, _ := v[1].(string)
	pttl, _ := v[2].(int64)
	fence, _ := strconv.ParseUint(fs, 10, 64)
	if pttl == -2 { // expired between GET and PTTL: cannot happen inside a script
		return distlock.Holder{}, 0, fmt.Errorf("key is free: %w", distlock.ErrNotHeld)
	}
	return distlock.Holder{Fence: fence, Owner: owner}, time.Duration(max(pttl, 0)) * time.Millisecond, nil
}

// Close stops the Locker's own background work, after the core's calls and
// Abandons have ended: the pub/sub hub of the Waits, the line of Waits, and the
// Group's workers and the commands left running by callers that left.
func (s *store) Close() error {
	l := (*Locker)(s)
	l.group.Close()
	l.node.Hub.Close()
	l.waiters.Close()
	l.group.Wait()
	return nil
}
