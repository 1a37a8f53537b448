package redlock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/internal/redisx"
)

// phase1 is one node's answer to acquireScript.
type phase1 struct {
	locked  bool
	fence   int64         // the node's fence counter (after the increment when locked)
	owner   string        // the holder's label when not locked
	digest  string        // the SHA-1 (hex) of the holder's token when not locked
	holdFor time.Duration // the holder's remaining time to live when not locked
	era     int64         // the node's era (see nodestate.go)
	out     *nodeState    // non-nil when the node does not count: it lost its data
}

// acquireCall is the keys and arguments of phase 1's script, the same on every node.
type acquireCall struct {
	keys []string
	args []any
}

func (l *Locker) acquireOn(ctx context.Context, i int, c acquireCall) (phase1, error) {
	if hook := l.hookAcquire.Load(); hook != nil {
		(*hook)(i)
	}
	v, err := l.nodes[i].Run(ctx, acquireScript, c.keys, c.args...).Result()
	if err != nil {
		return phase1{}, err
	}
	if f, ok := v.(int64); ok && f > 0 { // locked, era 0: the usual reply
		return phase1{locked: true, fence: f}, nil
	}
	a, _ := v.([]any)
	num := func(k int) int64 { x, _ := a[k].(int64); return x }
	if len(a) > 0 {
		switch num(0) {
		case 1:
			if len(a) == 3 && num(1) > 0 {
				return phase1{locked: true, fence: num(1), era: num(2)}, nil
			}
		case 0:
			if len(a) == 6 {
				owner, _ := a[2].(string)
				digest, _ := a[5].(string)
				return phase1{fence: num(1), owner: owner, digest: digest, holdFor: time.Duration(num(3)) * time.Millisecond, era: num(4)}, nil
			}
		case 2:
			if len(a) == 3 {
				epoch, _ := a[1].(string)
				token, _ := c.args[0].(string)
				return phase1{out: &nodeState{token: token, epoch: epoch, left: time.Duration(num(2)) * time.Millisecond}}, nil
			}
		}
	}
	return phase1{}, fmt.Errorf("unexpected reply %#v from the acquire script", v)
}

func (l *Locker) raiseOn(ctx context.Context, i int, n redisx.Names, token string, fence int64) (bool, error) {
	v, err := l.nodes[i].Run(ctx, raiseScript, []string{n.Lock, n.Fence, l.state.marker}, token, fence).Int64()
	return v == 1, err
}

// A releaseCall is the script, keys and arguments of a release of one token, the
// same on every node: built once per release, not once per node.
type releaseCall struct {
	script *redis.Script
	keys   []string
	args   []any
}

// newReleaseCall is the clean-up of an attempt's locks (releaseScript).
func newReleaseCall(n redisx.Names, token string) releaseCall {
	return releaseCall{script: releaseScript, keys: []string{n.Lock}, args: []any{token, n.Channel}}
}

// newJoinCall is the clean-up of an attempt that found key held by others, by a
// Locker that waits on key: it joins the key's turns where it releases a lock, with
// score (turns.go).
func newJoinCall(n redisx.Names, key, token, id string, score, ms int64) releaseCall {
	return releaseCall{script: releaseScript, keys: []string{n.Lock, turnsName(n, key)}, args: []any{token, n.Channel, id, score, ms}}
}

// newUnlockCall is Unlock's release of key's lease, which hands the next turn
// (releaseTurnScript, turns.go); leave is the Locker's ID when it has no waiters on
// key (it leaves the turns), else "".
func newUnlockCall(n redisx.Names, key, token string, leave any) releaseCall {
	return releaseCall{script: releaseTurnScript, keys: []string{n.Lock, turnsName(n, key)}, args: []any{token, n.Channel, leave}}
}

// releaseOn releases c's token's lock on node i; the token is one of ours
// (redisx.Ours).
func (l *Locker) releaseOn(ctx context.Context, i int, c releaseCall) (bool, error) {
	if hook := l.hookRelease.Load(); hook != nil {
		(*hook)(i)
	}
	v, err := l.nodes[i].Run(ctx, c.script, c.keys, c.args...).Int64()
	return v == 1, err
}

// release removes c's token's lock (the token is one of ours) from the nodes in idx
// with a fresh context that
// outlives the caller's (context.WithoutCancel), bounded by Options.CleanupTimeout.
// It waits for the nodes while ctx is alive, at most wait; the rest finish in the
// background (Close waits for them).
func (l *Locker) release(ctx context.Context, idx []int, c releaseCall, wait time.Duration) {
	if len(idx) == 0 {
		return
	}
	done := make(chan struct{})
	l.group.Go(func() {
		defer close(done)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opts.CleanupTimeout)
		defer cancel()
		fanout(cctx, l, idx, l.opts.CleanupTimeout, func(ctx context.Context, i int) (bool, error) {
			return l.releaseOn(ctx, i, c)
		}, nil, nil, false)
	})
	if ctx.Err() != nil || wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-ctx.Done():
	}
}
