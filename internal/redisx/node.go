package redisx

import (
	"context"
	"fmt"
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
	group  *Group                      // RunShared's workers (see SetGroup); nil: none
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

// runBatch sends batch in one pipeline and sets each one's result (v, err); it
// wakes none of them. A script that the server does not have is run again on
// its own (Run falls back to EVAL).
func (n *Node) runBatch(ctx context.Context, batch []*sharedReq) {
	if len(batch) == 1 { // a plain call costs less than a pipeline of one
		r := batch[0]
		r.v, r.err = n.Run(ctx, r.s, r.keys, r.args...).Result()
		return
	}
	p := n.Client.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, r := range batch {
		cmds[i] = r.s.EvalSha(ctx, p, r.keys, r.args...)
	}
	_, _ = p.Exec(ctx)
	for i, r := range batch {
		cmd := cmds[i]
		if IsNoScript(cmd.Err()) {
			cmd = n.Run(ctx, r.s, r.keys, r.args...)
		}
		r.v, r.err = cmd.Result()
	}
}

// RenewManyMax bounds the leases of one renewManyScript call of RenewMany: the
// server runs nothing else while a script runs (3 commands per lease).
const RenewManyMax = 256

// RenewMany renews many locks on a standalone node (not a Cluster, whose keys of
// one script must share a slot) in one pipeline of renewManyScript calls of up to
// RenewManyMax locks each: keys[i] is a
// lock, args[2i] its token and args[2i+1] its ttl in ms (as MillisArg), and each lock
// is extended as Renew extends it (never shortened). It reports, per lock, whether
// its token owns it. keys and args are only read: a caller may pass the same ones
// to every node. A chunk whose script the server lacks runs again with EVAL; an
// error of any chunk is the call's. The caller checks Ours of each token first.
func (n *Node) RenewMany(ctx context.Context, keys []string, args []any) ([]bool, error) {
	if len(args) != 2*len(keys) {
		return nil, fmt.Errorf("redisx: RenewMany: %d arguments for %d keys", len(args), len(keys))
	}
	chunk := func(k int) ([]string, []any) {
		hi := min(len(keys), k+RenewManyMax)
		return keys[k:hi], args[2*k : 2*hi]
	}
	cmds := make([]*redis.Cmd, 0, (len(keys)+RenewManyMax-1)/RenewManyMax)
	if len(keys) <= RenewManyMax {
		cmds = append(cmds, n.Run(ctx, renewManyScript, keys, args...))
	} else {
		p := n.Client.Pipeline()
		for k := 0; k < len(keys); k += RenewManyMax {
			ks, as := chunk(k)
			cmds = append(cmds, renewManyScript.EvalSha(ctx, p, ks, as...))
		}
		_, _ = p.Exec(ctx)
	}
	ok := make([]bool, len(keys))
	for c, cmd := range cmds {
		k := c * RenewManyMax
		ks, as := chunk(k)
		if IsNoScript(cmd.Err()) {
			cmd = n.Run(ctx, renewManyScript, ks, as...)
		}
		v, err := cmd.Slice()
		if err == nil && len(v) != len(ks) {
			err = fmt.Errorf("unexpected reply of %d values to %d renewals", len(v), len(ks))
		}
		if err != nil {
			return nil, err
		}
		for i, x := range v {
			r, _ := x.(int64)
			ok[k+i] = r == 1
		}
	}
	return ok, nil
}
