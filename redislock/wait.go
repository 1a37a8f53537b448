package redislock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

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
// It subscribes to the key's channel before it reads the time to live, so a release
// between the two is not missed. When ctx ends while key is held it returns
// errors.Join(distlock.ErrLocked, ctx.Err()). It returns other errors when it cannot
// subscribe or read the key. Each Wait uses one pub/sub connection of its own, closed
// before Wait returns (or, if ctx ended while the connection was being opened, right
// after).
func (l *Locker) Wait(ctx context.Context, key string) error {
	if err := l.checkKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return errors.Join(distlock.ErrLocked, err)
	}
	n := l.names(key)

	// No channel yet: this makes no request and cannot fail.
	ps := l.client.Subscribe(context.WithoutCancel(ctx))
	subscribed := make(chan error, 1)
	released := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := ps.Subscribe(ctx, n.channel); err != nil {
			subscribed <- err
			return
		}
		confirmed := false
		for {
			// Blocks until a message arrives or ps is closed (or ctx's deadline).
			msg, err := ps.Receive(ctx)
			if err != nil {
				if !confirmed {
					subscribed <- err
				} else {
					released <- err
				}
				return
			}
			switch m := msg.(type) {
			case *redis.Subscription:
				if !confirmed && m.Kind == "subscribe" && m.Channel == n.channel {
					confirmed = true
					subscribed <- nil
				}
			case *redis.Message:
				if m.Channel == n.channel {
					released <- nil
					return
				}
			}
		}
	}()
	closeSync := false
	defer func() {
		if closeSync {
			_ = ps.Close()
			<-done
			return
		}
		// Subscribe may still hold ps's lock while it dials: do not wait for it.
		go func() {
			_ = ps.Close()
			<-done
		}()
	}()

	select {
	case err := <-subscribed:
		closeSync = true
		if err != nil {
			if ctx.Err() != nil {
				return errors.Join(distlock.ErrLocked, ctx.Err())
			}
			return fmt.Errorf("redislock: Wait for key %s: subscribe: %w", showKey(key), err)
		}
	case <-ctx.Done():
		return errors.Join(distlock.ErrLocked, ctx.Err())
	}

	pttl, err := call(ctx, func() (time.Duration, error) {
		return l.client.PTTL(ctx, n.lock).Result()
	}, nil)
	if err != nil {
		if ctx.Err() != nil {
			return errors.Join(distlock.ErrLocked, ctx.Err())
		}
		return fmt.Errorf("redislock: Wait for key %s: %w", showKey(key), err)
	}
	// go-redis reports PTTL's -2 (no key) and -1 (no expiry) as these durations.
	var bound time.Duration
	switch {
	case pttl == -2:
		return nil
	case pttl < 0:
		bound = noTTLBound
	default:
		// PTTL truncates to the millisecond: add one so the timer fires after the
		// server's expiry, not just before it.
		bound = pttl + time.Millisecond
	}
	t := time.NewTimer(bound)
	defer t.Stop()
	for {
		select {
		case err := <-released:
			if err == nil {
				return nil
			}
			// The subscription broke: the timer still bounds the wait.
			if ctx.Err() != nil {
				return errors.Join(distlock.ErrLocked, ctx.Err())
			}
			released = nil
		case <-t.C:
			return nil
		case <-ctx.Done():
			return errors.Join(distlock.ErrLocked, ctx.Err())
		}
	}
}
