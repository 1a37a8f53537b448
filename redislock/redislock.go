package redislock

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/redisx"
	"github.com/distlock/distlock/internal/waitq"
)

// backend is the Backend of the Locker's errors.
const backend = "redislock"

// evalRetry bounds the EVAL that follows a NOSCRIPT reply when the call's context
// ended while the EVALSHA waited (see redisx.Run).
const evalRetry = 5 * time.Second

// A Locker takes leases on keys in one Redis deployment: a single server, a
// Sentinel-managed master (redis.NewFailoverClient) or a Redis Cluster
// (redis.NewClusterClient). It implements distlock.Locker, distlock.Waiter and
// distlock.Inspector, and is safe for concurrent use. Make it with New; Close it
// when done (Close never closes the client).
type Locker struct {
	client redis.UniversalClient
	opts   Options
	node   *redisx.Node  // the scripts and the pub/sub hub of Wait
	group  *redisx.Group // calls and their goroutines, for Close
	// waiters are the Waits by release channel: a release wakes one per Locker.
	waiters *waitq.Queue
}

var (
	_ distlock.Locker    = (*Locker)(nil)
	_ distlock.Waiter    = (*Locker)(nil)
	_ distlock.Inspector = (*Locker)(nil)
)

// New returns a Locker that uses client, which the caller keeps and closes (after
// the Locker's Close). A nil opts means the defaults. New does no I/O (see
// CheckServer). A nil client or invalid opts is the returned error, an
// *distlock.OpError wrapping distlock.ErrInvalid that names the bad value.
//
// The Locker honours a context's cancellation and deadline even when the client does
// not (go-redis ignores them while it waits for a reply unless ContextTimeoutEnabled
// is set): a call returns as soon as its context is done, and the command it sent
// finishes in the background within the client's ReadTimeout. Set a finite
// ReadTimeout (go-redis' default is finite).
func New(client redis.UniversalClient, opts *Options) (*Locker, error) {
	if client == nil {
		return nil, opError("New", "", fmt.Errorf("%w: nil redis client", distlock.ErrInvalid))
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, opError("New", "", err)
	}
	q := waitq.New(0)
	hub := o.hub
	hub.Released = q.Released
	group := redisx.NewGroup()
	node := redisx.NewNode(client, 0, "redis", evalRetry, hub)
	node.SetGroup(group)
	return &Locker{
		client:  client,
		opts:    o,
		node:    node,
		group:   group,
		waiters: q,
	}, nil
}

// Close stops the Locker's background work and waits for it: the pub/sub connection
// that its Waits share is closed (Waits in progress return an error wrapping
// distlock.ErrClosed), and Close waits for the calls in progress and for the
// commands and cleanups they left running (each bounded by the client's timeouts and
// Options.CleanupTimeout). It does not close the client, and it does not release held
// leases: each stays held until its Unlock (before Close) or its ttl. Every call after
// Close returns an *distlock.OpError wrapping distlock.ErrClosed. Close is
// idempotent; it returns nil.
func (l *Locker) Close() error {
	if l.group.Close() {
		l.node.Hub.Close()
		l.waiters.Close()
	}
	l.group.Wait()
	return nil
}

// Owner returns the owner label that the Locker stores with its locks.
func (l *Locker) Owner() string { return l.opts.Owner }

// names returns the Redis names of key (see "Key layout" in the package doc).
func (l *Locker) names(key string) redisx.Names { return redisx.KeyNames(l.opts.Prefix, key) }

// opError is the error of op on key.
func opError(op, key string, err error) error {
	return &distlock.OpError{Backend: backend, Op: op, Key: key, Err: err}
}

// checkLease validates a Lease (and ttl, when not nil) for Renew and Unlock.
func checkLease(lease distlock.Lease, ttl *time.Duration) error {
	if err := driver.ValidateLease(lease); err != nil {
		return err
	}
	if err := driver.ValidateKey(lease.Key, MaxKeyLen); err != nil {
		return err
	}
	if ttl != nil {
		return driver.ValidateTTL(*ttl)
	}
	return nil
}
