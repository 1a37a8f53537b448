package redisx

import (
	"context"
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
	renews renewQueue                  // RenewShared's
}

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

// A renewQueue gathers the RenewShared calls of a Node that arrive while one is in
// flight, for the next to send in one pipeline.
type renewQueue struct {
	mu      sync.Mutex
	busy    bool // a renewal (or a batch of them) is in flight
	pending []*renewReq
}

// A renewReq is one RenewShared call that waits for its turn.
type renewReq struct {
	lock, token string
	ms          int64
	ok          bool
	err         error
	lead        []*renewReq   // set when this call is to send them (itself first)
	wake        chan struct{} // capacity 1: done, or lead is set
}

// RenewShared is Renew for callers that renew many leases at once (distlock.Hold
// with many leases): while one renewal is in flight, the calls that arrive queue up,
// and when it ends the first of them sends all of them in one pipeline (one write,
// one round trip on each connection it uses), with its context's values but without
// its cancellation: the others' renewals must not fail because one caller gave up.
// Each call still runs one script with its own token and ttl, and gets its own
// reply; a caller returns when its own reply has come, and sends at most one batch.
func (n *Node) RenewShared(ctx context.Context, lock, token string, ms int64) (bool, error) {
	q := &n.renews
	q.mu.Lock()
	if !q.busy {
		q.busy = true
		q.mu.Unlock()
		ok, err := n.Renew(ctx, lock, token, ms)
		n.nextRenews()
		return ok, err
	}
	r := &renewReq{lock: lock, token: token, ms: ms, wake: make(chan struct{}, 1)}
	q.pending = append(q.pending, r)
	q.mu.Unlock()
	<-r.wake
	if r.lead != nil {
		n.renewBatch(context.WithoutCancel(ctx), r.lead)
		n.nextRenews()
	}
	return r.ok, r.err
}

// nextRenews hands the queued renewals to the first of them, or marks the queue
// idle.
func (n *Node) nextRenews() {
	q := &n.renews
	q.mu.Lock()
	if len(q.pending) == 0 {
		q.busy = false
		q.mu.Unlock()
		return
	}
	batch := q.pending
	q.pending = nil
	q.mu.Unlock()
	batch[0].lead = batch
	batch[0].wake <- struct{}{}
}

// renewBatch sends batch in one pipeline, sets each one's result, and wakes all but
// the first (the caller). A script that the server does not have is run again on
// its own (Run falls back to EVAL).
func (n *Node) renewBatch(ctx context.Context, batch []*renewReq) {
	p := n.Client.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, r := range batch {
		cmds[i] = renewScript.EvalSha(ctx, p, []string{r.lock}, r.token, n.MillisArg(r.ms))
	}
	_, _ = p.Exec(ctx)
	for i, r := range batch {
		cmd := cmds[i]
		if IsNoScript(cmd.Err()) {
			cmd = n.Run(ctx, renewScript, []string{r.lock}, r.token, n.MillisArg(r.ms))
		}
		v, err := cmd.Int64()
		r.ok, r.err = v == 1, err
		if i > 0 {
			r.wake <- struct{}{}
		}
	}
}
