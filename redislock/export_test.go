package redislock

import (
	"context"
	"time"

	"github.com/distlock/distlock/internal/redisx"
)

// Acquire runs the acquire script once for key with the given token, as a resent
// TryLock would: it returns the fence when the lock is (now or already) held by token,
// or 0 when another token holds it.
func (l *Locker) Acquire(ctx context.Context, key, token string, ttl time.Duration) (int64, error) {
	r, err := l.acquire(ctx, l.names(key), token, redisx.Millis(ttl))
	return r.fence, err
}

// Names returns the Redis lock key, fence key and release channel of key.
func (l *Locker) Names(key string) (lock, fence, channel string) {
	n := l.names(key)
	return n.Lock, n.Fence, n.Channel
}

// WithHub sets the timings of the pub/sub hub in opts (nil: new Options) and returns
// it: ping is how long the connection may stay silent before it is pinged (and,
// silent as long again, replaced), idle how long it stays open after the last Wait,
// topicIdle how long a channel without waiters stays subscribed. Zero keeps a
// default.
func WithHub(opts *Options, ping, idle, topicIdle time.Duration) *Options {
	if opts == nil {
		opts = &Options{}
	}
	opts.hub = redisx.HubConfig{Ping: ping, Idle: idle, TopicIdle: topicIdle}
	return opts
}

// UnlockScriptHash returns the SHA1 of the unlock script, for tests that watch for it.
func UnlockScriptHash() string { return redisx.UnlockScriptHash() }

// AbandonScriptHash returns the SHA1 of the script that cleans up after a TryLock
// whose outcome is unknown, for tests that watch for it.
func AbandonScriptHash() string { return abandonScript.Hash() }

// SharedPending reports how many calls of l wait in its node's shared queue (see
// redisx.Node.RunShared).
func SharedPending(l *Locker) int { return l.node.SharedPending() }

// SetSharedSlots sets how many calls of l may be in flight before the next ones
// queue (redisx.Node.SetSharedSlots).
func SetSharedSlots(l *Locker, k int) { l.node.SetSharedSlots(k) }
