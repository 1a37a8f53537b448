package redisx

import (
	"context"
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
