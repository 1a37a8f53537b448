package redisx

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Node is one Redis deployment as a Locker sees it: redislock's server (or
// Cluster, or Sentinel-managed master), or one of redlock's masters. It runs the
// scripts the two backends share and owns the Hub of the Locker's Waits on it.
// redislock is one Node; redlock is N of them plus the quorum logic.
type Node struct {
	Client redis.UniversalClient
	Name   string // for messages: "node 2 (127.0.0.1:6379)"
	Hub    *Hub
	retry  time.Duration
	ms     atomic.Pointer[boxedMillis] // the last ttl argument, boxed
	shared sharedQueue                 // RunShared's
	// many: the node is one standalone server, so a batch of RenewShared calls
	// goes as one multi-key script (see SetStandalone).
	many bool
}

// SetStandalone tells n that its client reaches one standalone server (not a
// Cluster, whose keys of one script must share a slot): a batch of RenewShared calls
// then runs as one script per renewManyMax leases (renewManyScript) rather than one
// script per lease, which spares the server a command per lease and the client a
// command object per lease. Call it before n is used.
func (n *Node) SetStandalone() { n.many = true }

// boxedMillis is a ttl in milliseconds and the same as a script argument.
type boxedMillis struct {
	ms  int64
	arg any
}

// MillisArg returns ms as a script argument. A Locker's calls mostly use one ttl:
// the box of the last one is reused, which spares an allocation per call.
func (n *Node) MillisArg(ms int64) any {
	if b := n.ms.Load(); b != nil && b.ms == ms {
		return b.arg
	}
	b := &boxedMillis{ms: ms, arg: ms}
	n.ms.Store(b)
	return b.arg
}

// NewNode returns the Node of client, the index-th of its Locker, whose EVAL after a
// NOSCRIPT reply gets retry when the call's context has ended (see Run).
func NewNode(client redis.UniversalClient, index int, name string, retry time.Duration, hub HubConfig) *Node {
	return &Node{Client: client, Name: name, Hub: NewHub(client, index, hub), retry: retry}
}

// Run runs script s on the node (see the package function Run).
func (n *Node) Run(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	return Run(ctx, n.Client, s, n.retry, keys, args...)
}

// Renew extends the lock when token still owns it, to ms milliseconds unless it has
// more left (never shortening it), and reports whether token owns it. The caller
// checks Ours(token) first.
func (n *Node) Renew(ctx context.Context, lock, token string, ms int64) (bool, error) {
	v, err := n.Run(ctx, renewScript, []string{lock}, token, n.MillisArg(ms)).Int64()
	return v == 1, err
}

// Release deletes the lock of k when token still owns it, publishes the release on
// k's channel, and reports whether it deleted the lock. The caller checks
// Ours(token) first.
func (n *Node) Release(ctx context.Context, k Names, token string) (bool, error) {
	v, err := n.Run(ctx, unlockScript, []string{k.Lock}, token, k.Channel).Int64()
	return v == 1, err
}

// PTTL reads the lock's remaining time to live (see Bound).
func (n *Node) PTTL(ctx context.Context, lock string) (time.Duration, error) {
	return n.Client.PTTL(ctx, lock).Result()
}

// A sharedQueue gathers the RunShared calls of a Node that arrive while one is in
// flight, for the next to send in one pipeline.
type sharedQueue struct {
	mu      sync.Mutex
	busy    bool      // a call (or a batch of them) is in flight
	since   time.Time // when the call or batch in flight was sent
	pending []*sharedReq
}

// SharedStall is how long RunShared calls wait for the call or batch in flight
// before they give up sharing and go alone: a connection that hangs (until the
// client's ReadTimeout) holds up only the calls it carries, not every later one.
const SharedStall = 500 * time.Millisecond

// A sharedReq is one RunShared call that waits for its turn.
type sharedReq struct {
	s    *redis.Script
	keys []string
	args []any
	v    any
	err  error
	lead []*sharedReq  // set when this call is to send them (itself first)
	wake chan struct{} // capacity 1: done, or lead is set
}

// RenewShared is Renew through RunShared, for callers that renew many leases at
// once (distlock.Hold with many leases).
func (n *Node) RenewShared(ctx context.Context, lock, token string, ms int64) (bool, error) {
	v, err := n.RunShared(ctx, renewScript, []string{lock}, token, n.MillisArg(ms))
	i, _ := v.(int64)
	return i == 1 && err == nil, err
}

// RunShared runs script s as Run does, but shares round trips with the node's other
// RunShared calls: while one is in flight, the calls that arrive queue up, and when
// it ends the first of them sends all of them in one pipeline (one write, one round
// trip on each connection it uses), with its context's values but without its
// cancellation: the others' scripts must not fail because one caller gave up. Each
// call gets its own reply; a caller returns when its own reply has come, and sends
// at most one batch. A lone call is a plain Run.
func (n *Node) RunShared(ctx context.Context, s *redis.Script, keys []string, args ...any) (any, error) {
	q := &n.shared
	q.mu.Lock()
	if !q.busy {
		q.busy, q.since = true, time.Now()
		q.mu.Unlock()
		v, err := n.Run(ctx, s, keys, args...).Result()
		n.nextShared()
		return v, err
	}
	if time.Since(q.since) > SharedStall {
		q.mu.Unlock()
		return n.Run(ctx, s, keys, args...).Result()
	}
	r := &sharedReq{s: s, keys: keys, args: args, wake: make(chan struct{}, 1)}
	q.pending = append(q.pending, r)
	q.mu.Unlock()
	t := time.NewTimer(SharedStall)
	select {
	case <-r.wake:
		t.Stop()
	case <-t.C:
		q.mu.Lock()
		if i := slices.Index(q.pending, r); i >= 0 { // not taken yet: go alone
			q.pending = slices.Delete(q.pending, i, i+1)
			q.mu.Unlock()
			return n.Run(ctx, s, keys, args...).Result()
		}
		q.mu.Unlock()
		<-r.wake
	}
	if r.lead != nil {
		n.runBatch(context.WithoutCancel(ctx), r.lead)
		n.nextShared()
	}
	return r.v, r.err
}

// nextShared hands the queued calls to the first of them, or marks the queue idle.
func (n *Node) nextShared() {
	q := &n.shared
	q.mu.Lock()
	if len(q.pending) == 0 {
		q.busy = false
		q.mu.Unlock()
		return
	}
	batch := q.pending
	q.pending = nil
	q.since = time.Now()
	q.mu.Unlock()
	batch[0].lead = batch
	batch[0].wake <- struct{}{}
}

// runBatch sends batch in one pipeline, sets each one's result, and wakes all but
// the first (the caller). A script that the server does not have is run again on
// its own (Run falls back to EVAL). On a standalone node (SetStandalone) the
// renewals of the batch go as renewManyScript calls.
func (n *Node) runBatch(ctx context.Context, batch []*sharedReq) {
	many := func(r *sharedReq) bool { return false }
	if n.many {
		renews := 0
		for _, r := range batch {
			if r.s == renewScript {
				renews++
			}
		}
		if renews > 1 {
			many = func(r *sharedReq) bool { return r.s == renewScript }
		}
	}
	p := n.Client.Pipeline()
	var cmds []*redis.Cmd
	var renews []*sharedReq
	for _, r := range batch {
		if many(r) {
			renews = append(renews, r)
			continue
		}
		cmds = append(cmds, r.s.EvalSha(ctx, p, r.keys, r.args...))
	}
	var calls []manyCall
	for rest := renews; len(rest) > 0; {
		k := min(len(rest), renewManyMax)
		c := manyCall{reqs: rest[:k], keys: make([]string, k), args: make([]any, 0, 2*k)}
		for i, r := range c.reqs {
			c.keys[i] = r.keys[0]
			c.args = append(c.args, r.args...)
		}
		c.cmd = renewManyScript.EvalSha(ctx, p, c.keys, c.args...)
		calls = append(calls, c)
		rest = rest[k:]
	}
	_, _ = p.Exec(ctx)
	ci := 0
	for _, r := range batch {
		if many(r) {
			continue
		}
		cmd := cmds[ci]
		ci++
		if IsNoScript(cmd.Err()) {
			cmd = n.Run(ctx, r.s, r.keys, r.args...)
		}
		r.v, r.err = cmd.Result()
	}
	for _, c := range calls {
		cmd := c.cmd
		if IsNoScript(cmd.Err()) {
			cmd = n.Run(ctx, renewManyScript, c.keys, c.args...)
		}
		v, err := cmd.Slice()
		if err == nil && len(v) != len(c.reqs) {
			err = fmt.Errorf("unexpected reply of %d values to %d renewals", len(v), len(c.reqs))
		}
		for i, r := range c.reqs {
			if r.err = err; err == nil {
				r.v = v[i]
			}
		}
	}
	for _, r := range batch[1:] {
		r.wake <- struct{}{}
	}
}

// A manyCall is one renewManyScript call of a batch and the calls it answers.
type manyCall struct {
	reqs []*sharedReq
	keys []string
	args []any
	cmd  *redis.Cmd
}

// renewManyMax bounds the leases of one renewManyScript call: the server runs
// nothing else while a script runs (3 commands per lease).
const renewManyMax = 256
