package redislock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/redisx"
)

// Defaults of Options.
const (
	// DefaultPrefix is the key namespace when Options.Prefix is empty.
	DefaultPrefix = "distlock"
	// DefaultMaxKeyLen is the longest key, in bytes, when Options.MaxKeyLen is zero.
	// Each key is stored (in full) in the names of its lock key, its fence key and
	// its release channel, and the fence key is never deleted, so the limit also
	// bounds what a key costs in server memory.
	DefaultMaxKeyLen = 8 << 10
	// MaxOwnerLen is the longest Options.Owner label, in bytes.
	MaxOwnerLen = 256
)

// Options configure a Locker. A nil *Options means the defaults; so does each zero
// field.
type Options struct {
	// Prefix is the namespace of every Redis key and channel the Locker uses
	// (see the package documentation for the layout). Lockers with different
	// prefixes never see each other's locks. It must not contain '{' or '}', which
	// would change the keys' Cluster hash tag. Default DefaultPrefix ("distlock").
	Prefix string
	// Owner is a label stored with every lock this Locker takes; Inspect reports
	// it, and ErrLocked errors name it. It is for people, not for the owner check
	// (that uses the Lease's Token). At most MaxOwnerLen bytes. Default
	// "<hostname>:<pid>".
	Owner string
	// MaxKeyLen is the longest key, in bytes, that the Locker accepts; a longer one
	// gives ErrInvalid. It must not be negative. Zero means DefaultMaxKeyLen (8 KiB).
	MaxKeyLen int
}

// withDefaults returns o with its zero fields filled in, or an error wrapping
// distlock.ErrInvalid that names the bad option.
func (o *Options) withDefaults() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Prefix == "" {
		r.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(r.Prefix, "{}") {
		return r, fmt.Errorf("%w: redislock: Options.Prefix %q contains '{' or '}'", distlock.ErrInvalid, r.Prefix)
	}
	if r.Owner == "" {
		r.Owner = distlock.DefaultOwner()
	}
	if len(r.Owner) > MaxOwnerLen {
		return r, fmt.Errorf("%w: redislock: Options.Owner of %d bytes is longer than %d bytes", distlock.ErrInvalid, len(r.Owner), MaxOwnerLen)
	}
	if r.MaxKeyLen < 0 {
		return r, fmt.Errorf("%w: redislock: Options.MaxKeyLen %d is negative", distlock.ErrInvalid, r.MaxKeyLen)
	}
	if r.MaxKeyLen == 0 {
		r.MaxKeyLen = DefaultMaxKeyLen
	}
	return r, nil
}

// A Locker takes leases on keys in one Redis deployment: a single server, a
// Sentinel-managed master (redis.NewFailoverClient) or a Redis Cluster
// (redis.NewClusterClient). It implements distlock.Locker, distlock.Waiter and
// distlock.Inspector, and is safe for concurrent use. Its only resource is the
// pub/sub connection that its Waits share, which closes by itself when no Wait has
// used it for 5s, or when the client is closed (see Close); closing the client is
// the caller's business.
type Locker struct {
	client  redis.UniversalClient
	opts    Options
	err     error      // non-nil when New got a nil client or bad options
	hub     hub        // Wait's pub/sub connection
	workers workerPool // run the commands of calls whose context can be cancelled
}

var (
	_ distlock.Locker    = (*Locker)(nil)
	_ distlock.Waiter    = (*Locker)(nil)
	_ distlock.Inspector = (*Locker)(nil)
)

// New returns a Locker that uses client. A nil opts means the defaults.
//
// New does not fail. When client is nil or opts is invalid (see Options), every
// method of the returned Locker returns that error, which wraps distlock.ErrInvalid
// and names the bad value; call Err to check for it at start-up.
//
// The Locker honours a context's cancellation and deadline even when the client does
// not (go-redis ignores them while it waits for a reply unless ContextTimeoutEnabled
// is set): a call returns as soon as its context is done, and the command it sent
// finishes in the background within the client's ReadTimeout. Set a finite
// ReadTimeout (go-redis' default is finite).
func New(client redis.UniversalClient, opts *Options) *Locker {
	o, err := opts.withDefaults()
	if err == nil && client == nil {
		err = fmt.Errorf("%w: redislock: nil redis client", distlock.ErrInvalid)
	}
	return &Locker{client: client, opts: o, err: err, hub: hub{client: client, ping: hubPing}}
}

// Close closes the pub/sub connection that the Locker's Waits share, if it is
// open; Waits in progress return nil (their keys may be free: call TryLock). The
// Locker stays usable: a later Wait opens a connection again. Close is optional:
// the connection also closes hubIdle (5s) after the last Wait ended, and when the
// client is closed. It returns nil.
func (l *Locker) Close() error {
	l.hub.close()
	return nil
}

// Err returns the error that New found in its arguments, or nil.
func (l *Locker) Err() error { return l.err }

// Owner returns the owner label that the Locker stores with its locks.
func (l *Locker) Owner() string { return l.opts.Owner }

// names are the Redis names of one user key. They share the hash tag {<tag>}, so
// the lock and fence keys hash to one Cluster slot, and the channel to that slot too.
type names struct {
	lock, fence, channel string
}

// names returns the Redis names of key: "<prefix>:{<tag>}:lock:<key>",
// "<prefix>:{<tag>}:fence:<key>" and "<prefix>:{<tag>}:release:<key>", where <tag> is
// the first 8 bytes of SHA-256(key) in hex. Redis hashes only the text between the
// first '{' and the next '}'; the prefix holds no brace and the tag is hex, so that is
// always the tag, whatever braces key contains. The key follows in full after a
// fixed-length part, so distinct keys (and distinct prefixes) give distinct names: no
// collisions, however unlikely, and the keys stay readable in redis-cli.
func (l *Locker) names(key string) names {
	sum := sha256.Sum256([]byte(key))
	var b strings.Builder
	b.Grow(len(l.opts.Prefix) + 2 + 16 + 2 + len("release:") + len(key))
	b.WriteString(l.opts.Prefix)
	b.WriteString(":{")
	var tag [16]byte
	hex.Encode(tag[:], sum[:8])
	b.Write(tag[:])
	b.WriteString("}:")
	base := b.String()
	return names{
		lock:    base + "lock:" + key,
		fence:   base + "fence:" + key,
		channel: base + "release:" + key,
	}
}

// checkKey returns the Locker's own error, or the error of ValidateKey.
func (l *Locker) checkKey(key string) error {
	if l.err != nil {
		return l.err
	}
	return distlock.ValidateKey(key, l.opts.MaxKeyLen)
}

func (l *Locker) checkLease(lease distlock.Lease, ttl *time.Duration) error {
	if l.err != nil {
		return l.err
	}
	if err := distlock.ValidateLease(lease); err != nil {
		return err
	}
	if err := distlock.ValidateKey(lease.Key, l.opts.MaxKeyLen); err != nil {
		return err
	}
	if ttl != nil {
		return distlock.ValidateTTL(*ttl)
	}
	return nil
}

// millis returns ttl in whole milliseconds, rounded up: the server must never
// free the key before the client's Expires.
func millis(ttl time.Duration) int64 {
	ms := int64(ttl / time.Millisecond)
	if ttl%time.Millisecond != 0 {
		ms++
	}
	return ms
}

// evalRetry bounds the EVAL that follows a NOSCRIPT reply when the call's context
// ended while the EVALSHA waited (see redisx.Run).
const evalRetry = 5 * time.Second

// cleanupTimeout bounds the removal of a half-made lock: the lock expires by itself
// after ttl, so waiting much longer is pointless; but give a short ttl a fair try.
func cleanupTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl, time.Second), 5*time.Second)
}

// showKey formats key for an error message, shortening a long one.
func showKey(key string) string {
	const max = 64
	if len(key) <= max {
		return strconv.Quote(key)
	}
	return fmt.Sprintf("%q... (%d bytes)", key[:max], len(key))
}

// acquired is the parsed reply of acquireScript.
type acquired struct {
	fence  int64  // > 0 when the lock was taken
	owner  string // the holder's label when it was not
	holder time.Duration
}

func (l *Locker) acquire(ctx context.Context, n names, token string, ms int64) (acquired, error) {
	v, err := redisx.Run(ctx, l.client, acquireScript, evalRetry, []string{n.lock, n.fence}, token+"|"+l.opts.Owner, ms, token+"|").Result()
	if err != nil {
		return acquired{}, err
	}
	switch v := v.(type) {
	case int64:
		if v > 0 {
			return acquired{fence: v}, nil
		}
	case []any:
		if len(v) == 2 {
			owner, _ := v[0].(string)
			pttl, _ := v[1].(int64)
			return acquired{owner: owner, holder: time.Duration(pttl) * time.Millisecond}, nil
		}
	}
	return acquired{}, fmt.Errorf("redislock: unexpected reply %#v from the acquire script", v)
}

// release runs the owner-checked unlock script; it reports whether it deleted the lock.
func (l *Locker) release(ctx context.Context, n names, token string) (bool, error) {
	if strings.Contains(token, "|") { // not one of ours: it owns nothing
		return false, nil
	}
	v, err := redisx.Run(ctx, l.client, unlockScript, evalRetry, []string{n.lock}, token+"|", n.channel).Int64()
	return v == 1, err
}

// removeHalfMade deletes, in the background, the lock that an attempt with an unknown
// outcome may have made: with its token (so it never touches another owner's lock)
// and a fresh context bounded by cleanupTimeout, never the caller's, which may be
// dead. The caller does not wait: the attempt already failed, and a failing network
// would make it wait for the client's retries a second time. If the removal fails
// too, the lock expires by itself after ttl.
func (l *Locker) removeHalfMade(ctx context.Context, n names, token string, ttl time.Duration) {
	go func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout(ttl))
		defer cancel()
		_, _ = l.release(cctx, n, token)
	}()
}

// TryLock makes one attempt to acquire key for ttl: one script that sets the lock
// key if it is absent (SET NX PX, on the server's clock, with ttl rounded up to a
// millisecond) and increments the key's fence counter. It returns an error wrapping
// distlock.ErrLocked, naming the holder's owner label, when another lease holds key.
//
// The Lease's Expires is the time taken before the request was sent, plus ttl. When
// the reply comes after that (the round trip outlasted ttl), TryLock returns an error
// that does not wrap ErrLocked and removes the lock, as for an unknown outcome. When
// the outcome is unknown (a transport error, a timeout, ctx done while the request was
// in flight) TryLock returns an error that does not wrap ErrLocked and removes any
// lock the attempt made, in the background, with a fresh context bounded by ttl (at
// least 1s, at most 5s).
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	// The start of the lease, taken first: before the token's getrandom system call,
	// after which a loaded scheduler may keep this goroutine waiting for a while.
	start := time.Now()
	if err := l.checkKey(key); err != nil {
		return distlock.Lease{}, err
	}
	if err := distlock.ValidateTTL(ttl); err != nil {
		return distlock.Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return distlock.Lease{}, fmt.Errorf("redislock: TryLock of key %s: %w", showKey(key), err)
	}
	n := l.names(key)
	token := distlock.NewToken()
	ms := millis(ttl)
	// When a Wait of this Locker has the key's channel subscribed, a TryLock that
	// finds the key held spares the next Wait its own check (see hub).
	var tok hubToken
	watched := false
	if l.hub.live.Load() {
		tok, watched = l.hub.peek(n.channel)
	}
	r, err := call(ctx, &l.workers,
		func() (acquired, error) { return l.acquire(ctx, n, token, ms) },
		func(r acquired, err error) {
			// The caller has gone: whatever this attempt took, give it back.
			if err != nil || r.fence > 0 {
				l.removeHalfMade(ctx, n, token, ttl)
			}
		})
	if err != nil {
		l.removeHalfMade(ctx, n, token, ttl)
		return distlock.Lease{}, fmt.Errorf("redislock: TryLock of key %s: outcome unknown, any lock it made is being removed: %w", showKey(key), err)
	}
	if r.fence == 0 {
		if watched {
			l.hub.saw(n.channel, tok, r.holder)
		}
		return distlock.Lease{}, fmt.Errorf("redislock: key %s is held by %q for up to %v more: %w", showKey(key), r.owner, r.holder, distlock.ErrLocked)
	}
	expires := start.Add(ttl)
	if now := time.Now(); !expires.After(now) {
		// The lease ended before its reply came: give its lock back.
		l.removeHalfMade(ctx, n, token, ttl)
		return distlock.Lease{}, fmt.Errorf("redislock: TryLock of key %s: the reply came %v after the request, later than ttl %v: the lease had already expired; its lock is being removed",
			showKey(key), now.Sub(start), ttl)
	}
	return distlock.Lease{Key: key, Token: token, Fence: uint64(r.fence), Expires: expires}, nil
}

// Renew extends lease to ttl from now, if its token still owns the key (an atomic
// GET-compare-PEXPIRE script), and returns the new Lease, whose Expires is the time
// taken before the request was sent plus ttl. It never shortens the lock on the
// server: when the lock has more than ttl left, the script leaves it as it is, so
// the server holds the key until at least max(the old expiry, now + ttl). It returns
// an error wrapping distlock.ErrNotHeld when the lease expired, was released or
// another lease holds the key. Any other error (a transport error, ctx done, a reply
// that came after ttl) leaves the lease's state unknown; the old Expires bounds it.
func (l *Locker) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	start := time.Now()
	if err := l.checkLease(lease, &ttl); err != nil {
		return distlock.Lease{}, err
	}
	n := l.names(lease.Key)
	ms := millis(ttl)
	renewed, err := call(ctx, &l.workers, func() (int64, error) {
		if strings.Contains(lease.Token, "|") { // not one of ours: it owns nothing
			return 0, nil
		}
		return redisx.Run(ctx, l.client, renewScript, evalRetry, []string{n.lock}, lease.Token+"|", ms).Int64()
	}, nil)
	if err != nil {
		return distlock.Lease{}, fmt.Errorf("redislock: Renew of key %s (fence %d): %w", showKey(lease.Key), lease.Fence, err)
	}
	if renewed != 1 {
		return distlock.Lease{}, fmt.Errorf("redislock: Renew of key %s (fence %d): %w", showKey(lease.Key), lease.Fence, distlock.ErrNotHeld)
	}
	expires := start.Add(ttl)
	if now := time.Now(); !expires.After(now) {
		return distlock.Lease{}, fmt.Errorf("redislock: Renew of key %s (fence %d): the reply came %v after the request, later than ttl %v; the old Expires still bounds the lease",
			showKey(lease.Key), lease.Fence, now.Sub(start), ttl)
	}
	lease.Expires = expires
	return lease, nil
}

// Unlock releases lease if its token still owns the key (an atomic GET-compare-DEL
// script) and publishes the release on the key's channel, which wakes Wait. It
// returns an error wrapping distlock.ErrNotHeld, and changes nothing, when the lease
// no longer held the key. If ctx ends first, Unlock returns ctx's error and the
// request completes in the background.
//
// If the connection breaks after the script ran and go-redis resends it, the resent
// script finds the key gone and Unlock reports ErrNotHeld although this lease was
// released by it: either way the lease is over.
func (l *Locker) Unlock(ctx context.Context, lease distlock.Lease) error {
	if err := l.checkLease(lease, nil); err != nil {
		return err
	}
	n := l.names(lease.Key)
	ok, err := call(ctx, &l.workers, func() (bool, error) { return l.release(ctx, n, lease.Token) }, nil)
	if err != nil {
		return fmt.Errorf("redislock: Unlock of key %s (fence %d): %w", showKey(lease.Key), lease.Fence, err)
	}
	if !ok {
		return fmt.Errorf("redislock: Unlock of key %s (fence %d): %w", showKey(lease.Key), lease.Fence, distlock.ErrNotHeld)
	}
	return nil
}
