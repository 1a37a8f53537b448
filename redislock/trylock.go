package redislock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/redisx"
)

// acquired is the parsed reply of acquireScript.
type acquired struct {
	fence  int64  // > 0 when the lock was taken
	owner  string // the holder's label when it was not
	holder time.Duration
}

// acquire runs acquireScript for n through the node's shared queue (see
// redisx.Node.RunShared): concurrent TryLocks share round trips. When ctx ends
// while the script is in flight, acquire returns ctx's error and the script's late
// reply goes to abandon (nil: none).
func (l *Locker) acquire(ctx context.Context, n redisx.Names, token string, ms int64, abandon func(any, error)) (acquired, error) {
	keys := []string{n.Lock, n.Fence, abandonedName(n, token)}
	v, err := l.node.RunShared(ctx, abandon, acquireScript, keys, token+"|"+l.opts.Owner, l.node.MillisArg(ms))
	if err != nil {
		return acquired{}, err
	}
	return parseAcquired(v)
}

// errAbandoned is parseAcquired's error for an acquire that found its token's
// abandoned marker: a late copy of an attempt that was cleaned up.
var errAbandoned = errors.New("the attempt was abandoned and cleaned up before it reached the server")

// parseAcquired parses a reply of acquireScript.
func parseAcquired(v any) (acquired, error) {
	switch v := v.(type) {
	case int64:
		if v > 0 {
			return acquired{fence: v}, nil
		}
		if v == -1 {
			return acquired{}, errAbandoned
		}
	case []any:
		if len(v) == 2 {
			owner, _ := v[0].(string)
			pttl, _ := v[1].(int64)
			return acquired{owner: owner, holder: time.Duration(pttl) * time.Millisecond}, nil
		}
	}
	return acquired{}, fmt.Errorf("unexpected reply %#v from the acquire script", v)
}

// abandonedFor is how long the abandoned marker of a TryLock's token lives after
// its cleanup: a copy of the acquire that reaches the server within that time
// changes nothing (see Safety assumptions in the package doc). It covers Linux's
// retransmission of what a closed connection had not delivered
// (tcp_orphan_retries: about 100s with a 200ms retransmission timeout).
const abandonedFor = 5 * time.Minute

// abandonedName is the Redis name of token's abandoned marker for the lock of n:
// "<prefix>:{<tag>}:abandoned:<token>", in the lock's Cluster slot.
func abandonedName(n redisx.Names, token string) string {
	// The prefix holds no brace and the tag is hex: the first "}:" ends the tag.
	i := strings.Index(n.Lock, "}:") + len("}:")
	return n.Lock[:i] + "abandoned:" + token
}

// removeHalfMade cleans up, in the background, after an attempt with an unknown
// outcome (abandonScript): it marks the attempt's token abandoned for
// abandonedFor, so that a copy of the attempt that reaches the server later locks
// nothing, and deletes the lock that the attempt may have made, with its token (so
// it never touches another owner's lock). It runs with a fresh context bounded by
// Options.CleanupTimeout, never the caller's, which may be dead. The caller does
// not wait: the attempt already failed, and a failing network would make it wait
// for the client's retries a second time. If the cleanup fails too, a lock that
// the attempt made expires by itself after ttl. Close waits for it.
func (l *Locker) removeHalfMade(ctx context.Context, n redisx.Names, token string) {
	l.group.Go(func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opts.CleanupTimeout)
		defer cancel()
		keys := []string{n.Lock, abandonedName(n, token)}
		_ = l.node.Run(cctx, abandonScript, keys, token, n.Channel, abandonedFor.Milliseconds()).Err()
	})
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
// lock the attempt made, in the background, with a fresh context bounded by
// Options.CleanupTimeout. Every error is an *distlock.OpError.
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	// The start of the lease, taken first: before the token's getrandom system call,
	// after which a loaded scheduler may keep this goroutine waiting for a while.
	start := time.Now()
	if err := l.group.Enter(); err != nil {
		return distlock.Lease{}, opError("TryLock", key, err)
	}
	defer l.group.Leave()
	lease, err := l.tryLock(ctx, key, ttl, start)
	if err != nil {
		return distlock.Lease{}, opError("TryLock", key, err)
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
	n := l.names(key)
	token := driver.NewToken()
	ms := redisx.Millis(ttl)
	// When a Wait of this Locker has the key's channel subscribed, a TryLock that
	// finds the key held spares the next Wait its own check (see redisx.Hub).
	hub := l.node.Hub
	var tok redisx.Token
	watched := false
	// Waits are in line only while the hub has channels (a Wait registers before it
	// joins its line, and a channel outlives its last Wait by far longer than a
	// handoff): without, neither Peek nor the queue's lock is needed.
	live := hub.Live()
	if live {
		// This attempt ends the handoff to the Wait that a release woke (if any);
		// if it fails for another reason than the key being held, the next Wait
		// is woken.
		l.waiters.Attempt(n.Channel)
		tok, watched = hub.Peek(n.Channel)
	}
	var abandon func(any, error)
	if ctx.Done() != nil {
		abandon = func(v any, err error) {
			// The caller has gone: whatever this attempt took, give it back.
			// (A late copy that found the token marked abandoned made nothing.)
			if r, perr := parseAcquired(v); err != nil || perr != nil && !errors.Is(perr, errAbandoned) || r.fence > 0 {
				l.removeHalfMade(ctx, n, token)
			}
		}
	}
	r, err := l.acquire(ctx, n, token, ms, abandon)
	if err != nil {
		if live {
			l.waiters.AttemptFailed(n.Channel)
		}
		l.removeHalfMade(ctx, n, token)
		return distlock.Lease{}, fmt.Errorf("outcome unknown, any lock it made is being removed: %w", err)
	}
	if r.fence == 0 {
		if watched {
			hub.Saw(n.Channel, tok, r.holder)
		}
		return distlock.Lease{}, fmt.Errorf("held by %q for up to %v more: %w", r.owner, r.holder, distlock.ErrLocked)
	}
	expires := start.Add(ttl)
	if now := time.Now(); !expires.After(now) {
		// The lease ended before its reply came: give its lock back.
		if live {
			l.waiters.AttemptFailed(n.Channel)
		}
		l.removeHalfMade(ctx, n, token)
		return distlock.Lease{}, fmt.Errorf("the reply came %v after the request, later than ttl %v: the lease had already expired; its lock is being removed",
			now.Sub(start), ttl)
	}
	return distlock.Lease{Key: key, Token: token, Fence: uint64(r.fence), Expires: expires}, nil
}
