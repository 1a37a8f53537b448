package redislock

import (
	"context"
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
//
// Its TryLock, Renew, Unlock and Inspect are the driver package's core over the
// one-attempt scripts of store (store.go, acquire.go).
type Locker struct {
	core   *driver.Locker // validation, Expires, late replies, Abandon, Close
	calls  *driver.Calls  // core's call lifecycle, for Wait and CheckServer
	client redis.UniversalClient
	opts   Options
	node   *redisx.Node  // the scripts and the pub/sub hub of Wait
	group  *redisx.Group // the workers that run requests whose caller may leave
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
	l := &Locker{client: client, opts: o, group: redisx.NewGroup(), waiters: q}
	l.node = redisx.NewNode(client, 0, "redis", evalRetry, hub)
	l.node.SetGroup(l.group)
	l.core, err = driver.NewLocker((*store)(l), driver.Config{
		Backend:        backend,
		MaxKeyLen:      MaxKeyLen,
		CleanupTimeout: o.CleanupTimeout,
	})
	if err != nil {
		return nil, err
	}
	l.calls = l.core.Calls()
	// A call that only Close can end runs its request on its caller's goroutine.
	l.group.SetInline(l.calls.Closing())
	return l, nil
}

// Close stops the Locker's background work and waits for it: calls in flight
// return with an error wrapping distlock.ErrClosed (a call with a context that can
// never end, such as context.Background, runs its request on its own goroutine and
// returns when that request ends, within the client's ReadTimeout), the cleanups of
// TryLocks of unknown outcome run to their end (each bounded by
// Options.CleanupTimeout), and the pub/sub connection of the Waits closes. It does
// not close the client, and it does not release held leases: each stays held until
// its Unlock (before Close) or its ttl. Every call after Close returns an
// *distlock.OpError wrapping distlock.ErrClosed. Close is idempotent; it returns
// nil.
func (l *Locker) Close() error { return l.core.Close() }

// TryLock makes one attempt to acquire key for ttl: one script that sets the lock
// key if it is absent (SET NX PX, on the server's clock, with ttl rounded up to a
// millisecond) and increments the key's fence counter. It returns an error wrapping
// distlock.ErrLocked, naming the holder's owner label, when another lease holds key.
// The Lease's Expires is the time taken before the request was sent, plus ttl; a
// reply that comes after that is an error. When the outcome is unknown (a transport
// error, a timeout, ctx done while the request was in flight, a late reply) TryLock
// returns an error that does not wrap ErrLocked and removes any lock the attempt
// made, in the background (see Failure handling in the package doc).
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	return l.core.TryLock(ctx, key, ttl)
}

// Renew extends lease to ttl from now, if its token still owns the key (an atomic
// GET-compare-PEXPIRE script), and returns the new Lease, whose Expires is the time
// taken before the request was sent plus ttl. It never shortens the lock on the
// server: the server holds the key until at least max(the old expiry, now + ttl). It
// returns an error wrapping distlock.ErrNotHeld when the lease expired (at once,
// without a request, once its Expires has passed), was released or another lease
// holds the key. Any other error (a transport error, ctx done, a reply that came
// after ttl) leaves the lease's state unknown; the old Expires bounds it.
func (l *Locker) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	return l.core.Renew(ctx, lease, ttl)
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
	return l.core.Unlock(ctx, lease)
}

// Inspect returns the current holder of key: its fence, its owner label and, as
// Expires, the time taken before the request was sent plus the lock's remaining
// time to live on the server (PTTL). It returns an error wrapping
// distlock.ErrNotHeld when key is free.
func (l *Locker) Inspect(ctx context.Context, key string) (distlock.Holder, error) {
	return l.core.Inspect(ctx, key)
}

// Owner returns the owner label that the Locker stores with its locks.
func (l *Locker) Owner() string { return l.opts.Owner }

// names returns the Redis names of key (see "Key layout" in the package doc).
func (l *Locker) names(key string) redisx.Names { return redisx.KeyNames(l.opts.Prefix, key) }

// opError is the error of op on key, for the calls that are not the core's.
func opError(op, key string, err error) error {
	return &distlock.OpError{Backend: backend, Op: op, Key: key, Err: err}
}
