package redislock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/redisx"
)

// acquired is the parsed reply of acquireScript.
type acquired struct {
	fence  int64  // > 0 when the lock was taken
	owner  string // the holder's label when it was not
	holder time.Duration
}

// Acquire runs acquireScript once for key under token (see store). When a Wait of
// this Locker has the key's channel subscribed, an attempt that finds the key held
// spares the next Wait its own check (see redisx.Hub); the attempt also ends the
// handoff to the Wait that a release woke, and one that fails for another reason
// than the key being held wakes the next Wait.
func (s *store) Acquire(ctx context.Context, key, token string, ttl time.Duration) (uint64, error) {
	l := (*Locker)(s)
	n := l.names(key)
	hub := l.node.Hub
	var tok redisx.Token
	watched := false
	// Waits are in line only while the hub has channels (a Wait registers before it
	// joins its line, and a channel outlives its last Wait by far longer than a
	// handoff): without, neither Peek nor the queue's lock is needed.
	live := hub.Live()
	if live {
		l.waiters.Attempt(n.Channel)
		tok, watched = hub.Peek(n.Channel)
	}
	r, err := l.acquire(ctx, n, token, redisx.Millis(ttl))
	if err != nil {
		if live {
			l.waiters.AttemptFailed(n.Channel)
		}
		return 0, err
	}
	if r.fence == 0 {
		if watched {
			hub.Saw(n.Channel, tok, r.holder)
		}
		return 0, fmt.Errorf("held by %q for up to %v more: %w", r.owner, r.holder, distlock.ErrLocked)
	}
	return uint64(r.fence), nil
}

// acquire runs acquireScript for n through the node's shared queue (see
// redisx.Node.RunShared): concurrent TryLocks share round trips. When ctx ends
// while the script is in flight, acquire returns ctx's error; the Locker's
// Abandon then makes sure that the script, whenever it runs, holds nothing.
func (l *Locker) acquire(ctx context.Context, n redisx.Names, token string, ms int64) (acquired, error) {
	keys := []string{n.Lock, n.Fence, abandonedName(n, token)}
	v, err := l.node.RunShared(ctx, acquireScript, keys, token+"|"+l.opts.Owner, l.node.MillisArg(ms))
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

// Abandon cleans up after an attempt with an unknown outcome (abandonScript): it
// marks the attempt's token abandoned for abandonedFor, so that a copy of the
// attempt that reaches the server later locks nothing, and deletes the lock that
// the attempt may have made, with its token (so it never touches another owner's
// lock), announcing the release as Unlock does. The core runs it in the
// background with a fresh context bounded by Options.CleanupTimeout; if it fails
// to the end, a lock that the attempt made expires by itself after ttl.
func (s *store) Abandon(ctx context.Context, key, token string, _ time.Duration, _ error) error {
	l := (*Locker)(s)
	n := l.names(key)
	keys := []string{n.Lock, abandonedName(n, token)}
	return l.node.Run(ctx, abandonScript, keys, token, n.Channel, abandonedFor.Milliseconds()).Err()
}
