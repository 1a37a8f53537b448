package distlock

import (
	"context"
	"errors"
	"time"
)

// A Lease is one acquisition of a key. It is a value: Renew returns a new Lease and the
// old one must not be used afterwards.
type Lease struct {
	// Key is the key that is held.
	Key string
	// Token is opaque and unique to this acquisition. It must carry at least 128 bits
	// from crypto/rand, so that no other client can guess it; a backend may append its
	// own handle (a node path, a lease ID). Renew and Unlock act only while the Token
	// still owns Key on the server.
	Token string
	// Fence is the fencing token: it must be strictly greater than the Fence of every
	// earlier acquisition of Key, by any client, across client and (where the backend
	// persists) server restarts. Hand it to the resource you protect, and let the
	// resource reject a write that carries a smaller Fence than one it has seen.
	Fence uint64
	// Expires is a local deadline that carries a monotonic clock reading. It must be
	// computed from a time taken BEFORE the request was sent (read the clock first
	// thing in the call, before validation or token generation): start + ttl, minus
	// the backend's clock-drift allowance where it has one, or earlier where the
	// server holds the key for less (etcdlock's reused leases), never later. Until
	// Expires no other owner
	// can hold Key; after it the holder must assume that someone else may. TryLock and
	// Renew never return a Lease whose Expires has already passed (a reply that came
	// after the ttl is an error).
	Expires time.Time
}

// IsZero reports whether l is the zero Lease.
func (l Lease) IsZero() bool { return l == Lease{} }

// Remaining returns how long the lease is still certainly held, measured on the
// monotonic clock; it is zero or negative once the lease must be assumed lost.
func (l Lease) Remaining() time.Duration { return time.Until(l.Expires) }

// A Locker acquires, renews and releases leases on keys. Implementations must be safe
// for concurrent use and must obey every rule below; the package conformance proves
// them (conformance.Run), each rule in a subtest that names it.
//
//  1. Mutual exclusion: for one key, the windows [acquired, Expires] of two leases
//     never overlap unless the earlier one was unlocked first. Renew moves Expires
//     and never shortens the server's hold. This holds under faults inside a cluster
//     too: a server cut off from its peers, a leader change, a minority that loses
//     its data (a backend that loses locks on a full restart says so).
//  2. Owner check: Renew and Unlock must act only while the lease's Token still owns
//     the key, atomically on the server. A stale holder's Unlock must never release
//     the next holder's lock.
//  3. Fencing: Fence must strictly increase per key across all acquisitions.
//  4. Expiry: a lease that is not renewed must free the key by ttl plus the
//     backend's documented grace (or, for session-based backends, by session expiry).
//  5. Errors: ErrLocked only when another owner holds the key; a transport failure
//     must be an error that is not ErrLocked. After an attempt whose outcome is
//     unknown, the backend must remove its own half-made lock with a fresh, bounded
//     context, never the caller's dead one.
//  6. Context: every call must return promptly once ctx is done.
//  7. Input: an empty key, a key over the backend's limit, ttl <= 0 and a zero Lease
//     must give ErrInvalid with a message that names the bad value. Keys are opaque
//     bytes: keys that differ in any byte must be different locks.
//  8. Time: server-side expiry must use the server's clock, never a client's wall
//     clock.
type Locker interface {
	// TryLock makes one attempt to acquire key for ttl. It returns ErrLocked, at
	// once, when another owner holds key (a Locker is not reentrant: a second TryLock
	// of a held key fails even from the same client).
	TryLock(ctx context.Context, key string, ttl time.Duration) (Lease, error)
	// Renew extends a held lease to ttl from now and returns the new Lease, whose
	// Expires is start + ttl. It must never shorten what the server holds: with a ttl
	// below what the lease has left, the server keeps the key at least until the old
	// Expires (only Unlock gives a key up early). So any error other than ErrNotHeld
	// (a lost reply, a timeout) leaves the old Lease valid until its Expires, whatever
	// the server did. It returns an error wrapping ErrNotHeld when the lease expired,
	// was released, or another owner holds the key now.
	Renew(ctx context.Context, lease Lease, ttl time.Duration) (Lease, error)
	// Unlock releases a held lease. It returns an error wrapping ErrNotHeld when the
	// lease was no longer held, in which case it changed nothing.
	Unlock(ctx context.Context, lease Lease) error
}

// Sentinel errors. Backends wrap them with detail; test for them with errors.Is.
var (
	// ErrLocked means that another owner holds the key. TryLock returns it; Lock and
	// Wait join it with ctx.Err() when the caller's context ends while the key is held.
	ErrLocked = errors.New("distlock: key is locked by another owner")
	// ErrNotHeld means that the lease expired, was released, or another owner holds
	// the key now (Renew, Unlock, Inspect of a free key, and the cause of a
	// Held.Context that was cancelled because its lease was lost).
	ErrNotHeld = errors.New("distlock: lease is not held")
	// ErrInvalid means a bad argument: an empty or oversized key, ttl <= 0, a zero
	// Lease, a bad option. It is always wrapped with a message naming the value.
	ErrInvalid = errors.New("distlock: invalid argument")
	// ErrClosed means that the Locker was closed: every call after Close returns it
	// (wrapped in an *OpError).
	ErrClosed = errors.New("distlock: locker is closed")
)

// A Holder describes the current holder of a key, as an Inspector sees it. It carries
// no Token, so it cannot be used to renew or release the lease.
type Holder struct {
	Key     string
	Fence   uint64
	Expires time.Time // local estimate: now + the server's remaining TTL
	Owner   string    // the holder's owner label (host, pid, ...), if the backend keeps one
}

// A Waiter is a Locker that can wait for a key to be released without polling
// (Redis pub/sub, etcd and ZooKeeper watches, PostgreSQL LISTEN/NOTIFY). Lock uses it
// when the Locker has it.
type Waiter interface {
	// Wait returns nil when key may be free: it was released, it expired, or Wait's
	// own bound passed (Wait must never block longer than the holder's remaining
	// ttl). A nil return is a hint, not a lease: call TryLock, at once. A backend may
	// wake the Waits of one key through one Locker one at a time: a release wakes the
	// first, and the next only if no TryLock of the key follows soon after (so that a
	// herd of waiters does not send a TryLock each per release). When ctx ends while
	// the key is held it returns errors.Join(ErrLocked, ctx.Err()).
	Wait(ctx context.Context, key string) error
}

// An Inspector is a Locker that can report who holds a key.
type Inspector interface {
	// Inspect returns the current holder of key, or an error wrapping ErrNotHeld
	// when key is free.
	Inspect(ctx context.Context, key string) (Holder, error)
}

// A LossNotifier is a Locker that learns of a lease's loss before its Expires
// (a ZooKeeper session that expired, an etcd lease that was revoked). Hold watches
// it and cancels Held.Context at once instead of at the next renewal.
type LossNotifier interface {
	// Lost returns a channel that is closed when the backend knows that lease is
	// lost; it must not be closed while the lease is held, and it must be closed
	// once the lease is unlocked through the same client (so watchers never leak).
	// It returns an already closed channel for a lease that is not held.
	Lost(lease Lease) <-chan struct{}
}

// A LossWatcher is a LossNotifier that can run a function on a lease's loss, so
// that a process holding many leases (Hold) needs no goroutine per lease to wait
// on Lost's channels.
type LossWatcher interface {
	LossNotifier
	// AfterLost arranges for f to run in its own goroutine once Lost(lease)'s
	// channel would close: never while lease is held, once it is lost or unlocked
	// through the same client, at once for a lease that is not held. stop ends
	// the arrangement; it reports true if it kept f from running, as the stop of
	// context.AfterFunc does. f runs at most once.
	AfterLost(lease Lease, f func()) (stop func() bool)
}
