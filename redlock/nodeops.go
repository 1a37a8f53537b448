package redlock

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/internal/redisx"
)

// phase1 is one node's answer to acquireScript.
type phase1 struct {
	locked  bool
	fence   int64         // the node's fence counter (after the increment when locked)
	owner   string        // the holder's label when not locked
	holdFor time.Duration // the holder's remaining time to live when not locked
	era     int64         // the node's era (see nodestate.go)
	out     *nodeState    // non-nil when the node does not count: it lost its data
}

// testHookAcquire, when set (by tests), runs before phase 1's script is sent to a
// node, with the node's index.
var testHookAcquire atomic.Pointer[func(i int)]

// acquireCall is the keys and arguments of phase 1's script, the same on every node.
type acquireCall struct {
	keys []string
	args []any
}

func (l *Locker) acquireOn(ctx context.Context, i int, c acquireCall) (phase1, error) {
	if hook := testHookAcquire.Load(); hook != nil {
		(*hook)(i)
	}
	v, err := l.run(ctx, i, acquireScript, c.keys, c.args...).Result()
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
			if len(a) == 5 {
				owner, _ := a[2].(string)
				return phase1{fence: num(1), owner: owner, holdFor: time.Duration(num(3)) * time.Millisecond, era: num(4)}, nil
			}
		case 2:
			if len(a) == 3 {
				epoch, _ := a[1].(string)
				return phase1{out: &nodeState{epoch: epoch, left: time.Duration(num(2)) * time.Millisecond}}, nil
			}
		}
	}
	return phase1{}, fmt.Errorf("redlock: unexpected reply %#v from the acquire script", v)
}

func (l *Locker) raiseOn(ctx context.Context, i int, n names, token string, fence int64) (bool, error) {
	v, err := l.run(ctx, i, raiseScript, []string{n.lock, n.fence, l.state.marker}, token, fence).Int64()
	return v == 1, err
}

func (l *Locker) releaseOn(ctx context.Context, i int, n names, token string) (bool, error) {
	v, err := l.run(ctx, i, unlockScript, []string{n.lock}, token, n.channel).Int64()
	return v == 1, err
}

// release removes token's lock from the nodes in idx with a fresh context that
// outlives the caller's (context.WithoutCancel), bounded by cleanupTimeout(ttl). It
// waits for the nodes while ctx is alive, at most wait; the rest finish in the
// background.
func (l *Locker) release(ctx context.Context, idx []int, n names, token string, ttl, wait time.Duration) {
	if len(idx) == 0 {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout(ttl))
		defer cancel()
		fanout(cctx, l, idx, cleanupTimeout(ttl), func(ctx context.Context, i int) (bool, error) {
			return l.releaseOn(ctx, i, n, token)
		}, nil, nil, false)
	}()
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

// run runs script s on node i (EVALSHA, then EVAL on NOSCRIPT). The EVAL that follows
// a NOSCRIPT reply gets a fresh context, bounded by Options.NodeTimeout, when ctx has
// ended meanwhile: a node whose script cache is empty (after any restart) and whose
// answer came after the fan-out stopped waiting must still do what it was asked, so
// that a late phase-1 grant can join its lease (see fanout's late handler).
func (l *Locker) run(ctx context.Context, i int, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	return redisx.Run(ctx, l.nodes[i].c, s, l.opts.NodeTimeout, keys, args...)
}
