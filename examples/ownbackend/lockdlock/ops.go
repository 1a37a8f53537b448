package lockdlock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// TryLock makes one attempt to acquire key for ttl. It returns an error wrapping
// distlock.ErrLocked when another owner holds key.
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	start := time.Now() // before anything else: Expires counts from here
	if err := driver.ValidateKey(key, MaxKeyLen); err != nil {
		return distlock.Lease{}, fail("TryLock", key, err)
	}
	if err := driver.ValidateTTL(ttl); err != nil {
		return distlock.Lease{}, fail("TryLock", key, err)
	}
	lease := distlock.Lease{Key: key, Token: driver.NewToken(), Expires: start.Add(ttl)}
	reply, sent, err := l.roundTrip(ctx, l.deadline(ctx, start, ttl), request("LOCK", key, lease.Token, ttl), false)
	if err == nil {
		lease.Fence, err = parseLock(reply)
	}
	if err == nil && !time.Now().Before(lease.Expires) {
		err = errLate
	}
	if err != nil {
		if sent && !errors.Is(err, distlock.ErrLocked) {
			l.abandon(ctx, key, lease.Token, ttl) // the server may hold key for us
		}
		return distlock.Lease{}, fail("TryLock", key, err)
	}
	return lease, nil
}

func parseLock(reply string) (uint64, error) {
	if reply == "LOCKED" {
		return 0, distlock.ErrLocked
	}
	if f, ok := strings.CutPrefix(reply, "OK "); ok {
		if fence, err := strconv.ParseUint(f, 10, 64); err == nil {
			return fence, nil
		}
	}
	return 0, errProtocol(reply)
}

// abandon removes the lock that a TryLock may have made after its caller stopped
// waiting for the reply: in the background, with a fresh context bounded by
// CleanupTimeout (never the caller's, which may be dead), retrying until the server
// confirms. CANCEL releases the key if the LOCK made it ours, and otherwise makes the
// server refuse the LOCK if it is still on its way.
//
// After Close it does nothing: the lock, if any, frees at its ttl.
func (l *Locker) abandon(ctx context.Context, key, token string, ttl time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opts.CleanupTimeout)
	req := request("CANCEL", key, token, ttl)
	l.cleanups.Go(func() {
		defer cancel()
		pause := 10 * time.Millisecond
		for {
			// Each attempt gets at most a second, so that one lost in a partition
			// does not use up the whole clean-up's time.
			reply, _, err := l.roundTrip(ctx, l.deadline(ctx, time.Now(), time.Second), req, true)
			if err == nil && reply == "OK" {
				return
			}
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return // the lock, if any, frees at its ttl
			}
			pause = min(2*pause, 500*time.Millisecond)
		}
	})
}

// Renew extends a held lease to ttl from now. The server never shortens the hold, so
// after an error other than distlock.ErrNotHeld the old lease stays valid until its
// Expires. A lease whose Expires has passed is not renewed (distlock.ErrNotHeld),
// even while the server still holds it: its holder was told it ended.
func (l *Locker) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	start := time.Now()
	if err := validLease(lease); err != nil {
		return distlock.Lease{}, fail("Renew", lease.Key, err)
	}
	if err := driver.ValidateTTL(ttl); err != nil {
		return distlock.Lease{}, fail("Renew", lease.Key, err)
	}
	if !start.Before(lease.Expires) {
		return distlock.Lease{}, fail("Renew", lease.Key, distlock.ErrNotHeld)
	}
	reply, _, err := l.roundTrip(ctx, l.deadline(ctx, start, ttl), request("RENEW", lease.Key, lease.Token, ttl), false)
	if err == nil {
		err = parseStatus(reply)
	}
	next := lease
	next.Expires = start.Add(ttl)
	if err == nil && !time.Now().Before(next.Expires) {
		err = errLate
	}
	if err != nil {
		return distlock.Lease{}, fail("Renew", lease.Key, err)
	}
	return next, nil
}

// Unlock releases a held lease; it returns an error wrapping distlock.ErrNotHeld when
// the lease was no longer held.
func (l *Locker) Unlock(ctx context.Context, lease distlock.Lease) error {
	start := time.Now()
	if err := validLease(lease); err != nil {
		return fail("Unlock", lease.Key, err)
	}
	reply, _, err := l.roundTrip(ctx, l.deadline(ctx, start, 0), request("UNLOCK", lease.Key, lease.Token, 0), false)
	if err == nil {
		err = parseStatus(reply)
	}
	if err != nil {
		return fail("Unlock", lease.Key, err)
	}
	return nil
}

func validLease(lease distlock.Lease) error {
	if err := driver.ValidateLease(lease); err != nil {
		return err
	}
	if err := driver.ValidateKey(lease.Key, MaxKeyLen); err != nil {
		return err
	}
	if len(lease.Token) > maxTokenLen {
		return fmt.Errorf("%w: Lease with a token of %d bytes (at most %d)", distlock.ErrInvalid, len(lease.Token), maxTokenLen)
	}
	return nil
}

func parseStatus(reply string) error {
	switch reply {
	case "OK":
		return nil
	case "NOTHELD":
		return distlock.ErrNotHeld
	}
	return errProtocol(reply)
}

// Wait returns nil when key may be free: it was released, its holder's expiry
// passed, or Options.Timeout passed (a hint; call TryLock). When ctx ends first it
// returns an error wrapping errors.Join(distlock.ErrLocked, ctx.Err()).
func (l *Locker) Wait(ctx context.Context, key string) error {
	start := time.Now()
	if err := driver.ValidateKey(key, MaxKeyLen); err != nil {
		return fail("Wait", key, err)
	}
	if err := ctx.Err(); err != nil {
		return fail("Wait", key, errors.Join(distlock.ErrLocked, err))
	}
	reply, _, err := l.roundTrip(ctx, l.deadline(ctx, start, 0), request("WAIT", key, "", 0), false)
	switch {
	case err == nil && reply == "FREE":
		return nil
	case err == nil:
		return fail("Wait", key, errProtocol(reply))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fail("Wait", key, errors.Join(distlock.ErrLocked, err))
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil // Wait's own bound passed
	default:
		return fail("Wait", key, err)
	}
}

// Inspect returns the holder of key, or an error wrapping distlock.ErrNotHeld when
// key is free. The Holder's Expires is the server's remaining time counted from
// before the request, so it is never late; lockd keeps no owner label.
func (l *Locker) Inspect(ctx context.Context, key string) (distlock.Holder, error) {
	start := time.Now()
	if err := driver.ValidateKey(key, MaxKeyLen); err != nil {
		return distlock.Holder{}, fail("Inspect", key, err)
	}
	reply, _, err := l.roundTrip(ctx, l.deadline(ctx, start, 0), request("INSPECT", key, "", 0), false)
	if err != nil {
		return distlock.Holder{}, fail("Inspect", key, err)
	}
	if reply == "FREE" {
		return distlock.Holder{}, fail("Inspect", key, distlock.ErrNotHeld)
	}
	var fence uint64
	var ms int64
	if _, err := fmt.Sscanf(reply, "HELD %d %d", &fence, &ms); err != nil {
		return distlock.Holder{}, fail("Inspect", key, errProtocol(reply))
	}
	return distlock.Holder{Key: key, Fence: fence, Expires: start.Add(time.Duration(ms) * time.Millisecond)}, nil
}
