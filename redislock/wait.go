package redislock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock"
)

// noTTLBound bounds a Wait for a lock key that has no time to live, which this
// package never makes (someone PERSISTed it, or wrote the key by hand).
const noTTLBound = time.Second

// Wait returns nil when key may be free: at once if it is free now, else when its
// holder releases it (Unlock publishes on the key's channel) or when the holder's
// remaining time to live, read from the server, has passed (a lock that expires
// publishes nothing). A nil return is a hint, not a lease: call TryLock.
//
// It subscribes to the key's channel before it checks that the key is held, so a
// release between the two is not missed. The check reads the time to live (PTTL),
// unless a TryLock of this Locker that started while the channel was subscribed
// found the key held and no release message arrived since: that TryLock was the
// check (this is what happens in distlock.Lock's loop of TryLock and Wait). When
// ctx ends while key is held it returns errors.Join(distlock.ErrLocked,
// ctx.Err()). It returns other errors when it cannot subscribe or read the key.
//
// The Waits of one Locker share one pub/sub connection, on which each key's
// channel is subscribed once, however many Waits want it. The connection opens
// with the first Wait and closes 5s after the last one ended (or on Close, or when
// the client is closed); a channel stays subscribed for a second after its last
// Wait, so that the next Wait of a wait loop finds it subscribed. If the
// connection breaks, Waits in progress return nil, since a release may have been
// missed.
func (l *Locker) Wait(ctx context.Context, key string) error {
	if err := l.checkKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return errors.Join(distlock.ErrLocked, err)
	}
	n := l.names(key)
	ls := l.hub.register(n.channel)
	defer l.hub.unregister(n.channel, ls)

	select {
	case err := <-ls.ready:
		if err != nil {
			if ctx.Err() != nil {
				return errors.Join(distlock.ErrLocked, ctx.Err())
			}
			return fmt.Errorf("redislock: Wait for key %s: subscribe: %w", showKey(key), err)
		}
	case <-ls.woke:
		return nil // the connection broke or closed: a release may be lost
	case <-ctx.Done():
		return errors.Join(distlock.ErrLocked, ctx.Err())
	}

	until, released, seen := l.hub.check(n.channel)
	switch {
	case released:
		return nil
	case !seen:
		pttl, err := call(ctx, &l.workers, func() (time.Duration, error) {
			return l.client.PTTL(ctx, n.lock).Result()
		}, nil)
		if err != nil {
			if ctx.Err() != nil {
				return errors.Join(distlock.ErrLocked, ctx.Err())
			}
			return fmt.Errorf("redislock: Wait for key %s: %w", showKey(key), err)
		}
		// go-redis reports PTTL's -2 (no key) and -1 (no expiry) as these durations.
		switch {
		case pttl == -2:
			return nil
		case pttl < 0:
			until = time.Now().Add(noTTLBound)
		default:
			// PTTL truncates to the millisecond: add one so the timer fires after
			// the server's expiry, not just before it.
			until = time.Now().Add(pttl + time.Millisecond)
		}
	}
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	select {
	case <-ls.woke:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return errors.Join(distlock.ErrLocked, ctx.Err())
	}
}
