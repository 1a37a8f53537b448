package sqllock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/sqllock/internal/calls"
)

// TryLock makes one attempt to acquire key for ttl: a single statement that inserts
// the key's row (with a fence above the table's high-water mark) or takes it over
// when it has expired by the database's clock, incrementing its fence. It returns an
// error wrapping distlock.ErrLocked when another lease holds key. Keys are opaque
// bytes of 1 to MaxKeyLen bytes.
//
// When the outcome is unknown (ctx ended, the connection broke), or the reply came
// after ttl (the lease had already expired: TryLock returns an error, not a Lease),
// TryLock releases what its statement may have taken, in the background (see the
// package doc, "Abandoned acquires"); Close waits for that.
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	start := time.Now() // first: Expires must not count from later than the caller's start
	cctx, end, err := l.calls.Begin(ctx)
	if err != nil {
		return distlock.Lease{}, l.opError("TryLock", key, err)
	}
	defer end()
	w := l.waits.Load()
	if w != nil {
		w.attempt(key)
	}
	lease, err := l.tryLock(cctx, key, ttl, start)
	if w != nil && err != nil && !errors.Is(err, distlock.ErrLocked) {
		w.free(key) // nobody may be about to take the key: the next Wait tries
	}
	if err != nil {
		return distlock.Lease{}, l.opError("TryLock", key, calls.Err(cctx, err))
	}
	return lease, nil
}

func (l *Locker) tryLock(ctx context.Context, key string, ttl time.Duration, start time.Time) (distlock.Lease, error) {
	if err := driver.ValidateKey(key, MaxKeyLen); err != nil {
		return distlock.Lease{}, err
	}
	if err := driver.ValidateTTL(ttl); err != nil {
		return distlock.Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return distlock.Lease{}, err
	}
	token := driver.NewToken()
	r := row(key, token)
	var fence int64
	var won bool
	var sess Session
	err := l.retry(ctx, func() error {
		var err error
		fence, won, sess, err = l.d.Acquire(ctx, r, ttl)
		return err
	})
	if err != nil {
		if l.definite(err) {
			return distlock.Lease{}, err
		}
		// The statement may have committed, or may still reach the database: end
		// its session, then release the row, in the background (so that TryLock
		// returns promptly) and with fresh bounded contexts, not ctx, which may be
		// what ended the attempt.
		l.calls.Go(func() { l.cleanup(ctx, r, sess) })
		return distlock.Lease{}, fmt.Errorf("outcome unknown, any row it took is being released: %w", err)
	}
	if !won {
		return distlock.Lease{}, distlock.ErrLocked
	}
	if fence <= 0 {
		// Cannot happen: fences start at 1 and only grow.
		return distlock.Lease{}, fmt.Errorf("the database returned fence %d", fence)
	}
	expires := start.Add(ttl)
	if now := time.Now(); !expires.After(now) {
		// The lease ended before its reply came: give its row back, as after an
		// abandoned attempt (the statement has committed: no session to end).
		l.calls.Go(func() { l.cleanup(ctx, r, Session{}) })
		return distlock.Lease{}, fmt.Errorf("the reply came %v after the request, later than ttl %v: the lease had already expired; its row is being released",
			now.Sub(start), ttl)
	}
	return distlock.Lease{Key: key, Token: token, Fence: uint64(fence), Expires: expires}, nil
}
