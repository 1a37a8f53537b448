package redislock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/redisx"
	"github.com/distlock/distlock/internal/waitq"
)

// Wait returns nil when key may be free: at once if it is free now, else when its
// holder releases it (Unlock publishes on the key's channel) or when the holder's
// remaining time to live, read from the server, has passed (a lock that expires
// publishes nothing). A nil return is a hint, not a lease: call TryLock.
//
// It subscribes to the key's channel and checks that the key is held once the
// subscription is confirmed, so a release between the two is not missed. The check
// reads the time to live (PTTL), unless a TryLock of this Locker that started while
// the channel was subscribed found the key held and no release message arrived since:
// that TryLock was the check (this is what happens in distlock.Lock's loop of TryLock
// and Wait). Until the subscription is confirmed (a connection that a NAT dropped
// never confirms it), a PTTL read sent at once bounds the wait: Wait never blocks
// longer than the holder's remaining time to live.
//
// When ctx ends while the key is held, or is done when Wait is called, it returns
// errors.Join(distlock.ErrLocked, ctx.Err()); when ctx ends before Wait saw the key
// held, it returns ctx's error without ErrLocked. It returns other errors when it
// cannot subscribe or read the key, and one wrapping distlock.ErrClosed when the
// Locker is closed; every error is an *distlock.OpError.
//
// A release wakes one Wait of the key per Locker, the first in line; the next one
// is woken only when no TryLock of the key starts within a handoff time (20ms) after
// it, or when that TryLock fails for another reason than the key being held. So a
// release costs a TryLock per Locker with waiters, not one per waiter.
//
// The Waits of one Locker share one pub/sub connection, on which each key's channel
// is subscribed once, however many Waits want it. The connection opens with the first
// Wait and closes 5s after the last one ended (or on Close, or when the client is
// closed); a channel stays subscribed for a second after its last Wait, so that the
// next Wait of a wait loop finds it subscribed. The connection is pinged after 5s of
// silence and replaced when the PING is not answered within 5s more. If the
// connection breaks or is replaced, Waits in progress return nil, since a release
// may have been missed.
func (l *Locker) Wait(ctx context.Context, key string) error {
	cctx, end, err := l.calls.Begin(ctx)
	if err != nil {
		return opError("Wait", key, err)
	}
	defer end()
	if err := l.wait(cctx, key); err != nil {
		return opError("Wait", key, driver.Err(cctx, err))
	}
	return nil
}

func (l *Locker) wait(ctx context.Context, key string) error {
	if err := driver.ValidateKey(key, MaxKeyLen); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return errors.Join(distlock.ErrLocked, err)
	}
	n := l.names(key)
	hub := l.node.Hub
	ls := redisx.NewListener(1)
	if err := hub.Register(n.Channel, ls); err != nil {
		return err
	}
	defer hub.Unregister(n.Channel, ls)
	// A release wakes the first Wait of the key's line on this Locker; the next one
	// only if no TryLock of the key follows (see internal/waitq).
	turn := l.waiters.Join(n.Channel)
	defer turn.Leave()
	w := waiter{Waiting: redisx.NewWaiting(ctx), l: l, ctx: ctx, lock: n.Lock, ls: ls, turn: turn}
	defer w.Stop()
	if done, err := w.subscribe(); done {
		return err
	}
	return w.whileHeld(n.Channel)
}

// A waiter is one Wait's state and its node.
type waiter struct {
	*redisx.Waiting
	l    *Locker
	ctx  context.Context
	lock string
	ls   *redisx.Listener
	turn *waitq.Waiter
	ttl  <-chan redisx.Result[time.Duration] // the PTTL read in flight, if any
}

// subscribe waits until the subscription of the key's channel is confirmed; until
// then, a PTTL read sent at once bounds the wait. done reports that the Wait ended
// before (with err).
func (w *waiter) subscribe() (done bool, err error) {
	select {
	case c := <-w.ls.Confirmed(): // the channel was subscribed already
		if c.Err != nil {
			return true, fmt.Errorf("subscribe: %w", c.Err)
		}
		return false, nil
	default:
		w.ttl = w.readTTL()
	}
	for {
		select {
		case c := <-w.ls.Confirmed():
			if c.Err == nil {
				return false, nil
			}
			if w.ctx.Err() != nil {
				return true, w.GaveUp()
			}
			return true, fmt.Errorf("subscribe: %w", c.Err)
		case r := <-w.ttl:
			w.ttl = nil
			if done, err := w.read(r); done {
				return true, err
			}
		case <-w.ls.Woke():
			return true, nil // a release, or one may have been missed
		case <-w.turn.Woken():
			return true, nil // a release, or one may have been missed
		case <-w.Bound:
			return true, nil
		case <-w.ctx.Done():
			return true, w.GaveUp()
		}
	}
}

// whileHeld runs once channel is subscribed (no release from now on is missed): it
// checks that the key is held and waits for its release, its ttl or ctx.
func (w *waiter) whileHeld(channel string) error {
	until, released, seen := w.l.node.Hub.Check(channel)
	switch {
	case released:
		return nil
	case seen:
		w.HeldUntil(until)
	default:
		w.ttl = w.readTTL()
	}
	for {
		select {
		case r := <-w.ttl:
			w.ttl = nil
			if done, err := w.read(r); done {
				if err != nil && w.Held() {
					continue // the bound read before stands
				}
				return err
			}
		case <-w.ls.Woke():
			return nil // a release, or one may have been missed
		case <-w.turn.Woken():
			return nil // a release, or one may have been missed
		case <-w.Bound:
			return nil
		case <-w.ctx.Done():
			return w.GaveUp()
		}
	}
}

// readTTL reads the lock's remaining time to live in the background.
func (w *waiter) readTTL() <-chan redisx.Result[time.Duration] {
	return redisx.Async(w.l.group, func() (time.Duration, error) { return w.l.node.PTTL(w.ctx, w.lock) })
}

// read acts on a PTTL reply: done with a nil error when the key is free, done with
// an error when the read failed; otherwise it moves the bound.
func (w *waiter) read(r redisx.Result[time.Duration]) (done bool, err error) {
	if r.Err != nil {
		if w.ctx.Err() != nil {
			return true, w.GaveUp()
		}
		return true, r.Err
	}
	until, free := redisx.Bound(r.V)
	if free {
		return true, nil
	}
	w.HeldUntil(until)
	return false, nil
}
