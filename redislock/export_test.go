package redislock

import (
	"context"
	"time"
)

// Acquire runs the acquire script once for key with the given token, as a resent
// TryLock would: it returns the fence when the lock is (now or already) held by token,
// or 0 when another token holds it.
func (l *Locker) Acquire(ctx context.Context, key, token string, ttl time.Duration) (int64, error) {
	r, err := l.acquire(ctx, l.names(key), token, millis(ttl))
	return r.fence, err
}

// Names returns the Redis lock key, fence key and release channel of key.
func (l *Locker) Names(key string) (lock, fence, channel string) {
	n := l.names(key)
	return n.lock, n.fence, n.channel
}

// SetHubPing sets how long the Locker's pub/sub connection may stay silent before
// it is pinged (and, silent as long again, replaced). Call it before the first Wait.
func (l *Locker) SetHubPing(d time.Duration) { l.hub.ping = d }

// UnlockScriptHash returns the SHA1 of the unlock script, for tests that watch for it.
func UnlockScriptHash() string { return unlockScript.Hash() }
