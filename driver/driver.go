package driver

import (
	"context"
	"time"

	"github.com/distlock/distlock"
)

// A Driver makes one attempt of each operation on its store, and nothing else: the
// Locker that NewLocker makes of it validates the arguments, measures Expires from
// before the request, refuses late replies and Renews of lapsed leases, retries
// what the Driver calls Retryable, cleans up after attempts of unknown outcome,
// wraps every error in a *distlock.OpError, and gives Close one meaning.
//
// Every method returns once ctx is done (with an error wrapping ctx's error, or the
// store's answer if it came first). Every method may be called concurrently.
type Driver interface {
	// Acquire makes one attempt to take key for ttl under token, atomically on the
	// store: it succeeds only when no unexpired lease holds key, and then returns
	// the lease's fence, strictly greater than every fence key had before (across
	// clients and restarts). It returns an error wrapping distlock.ErrLocked when
	// another lease holds key, and then must have had no effect. The store measures
	// ttl on its own clock.
	//
	// Any other error leaves the outcome unknown (the store may hold key for token,
	// or may still receive the request), unless Definite says otherwise; the Locker
	// then calls Abandon with that error.
	Acquire(ctx context.Context, key, token string, ttl time.Duration) (fence uint64, err error)

	// Renew moves the expiry of the lease that token holds on key to the later of
	// its expiry and now + ttl on the store's clock: it never shortens, so that a
	// Renew whose reply is lost leaves the old Expires a valid bound. It returns an
	// error wrapping distlock.ErrNotHeld when token does not hold key.
	Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) error

	// Release frees key if lease's token holds it, atomically on the store; it
	// returns an error wrapping distlock.ErrNotHeld when the token did not.
	Release(ctx context.Context, lease distlock.Lease) error

	// Abandon makes sure that an Acquire of token on key whose outcome is unknown
	// (it returned cause, or its reply came after ttl) holds key no longer and
	// never will: it releases key if token holds it, and makes the store refuse
	// the Acquire if it is still on its way (or shows that it cannot arrive any
	// more). ctx is not the caller's: it is fresh, and ends after the Locker's
	// CleanupTimeout. The Locker calls it again, after a pause, while it returns
	// an error and ctx lives.
	Abandon(ctx context.Context, key, token string, ttl time.Duration, cause error) error
}

// A Classifier is a Driver that tells its errors apart; a Driver that is not one
// has no retryable errors, and only ErrLocked is definite.
type Classifier interface {
	// Retryable reports whether err means that the store refused the request
	// without acting on it and it may simply be sent again (a serialization
	// failure, a deadlock, a busy database).
	Retryable(err error) bool
	// Definite reports whether err was reported for a request that therefore had
	// no effect, so that an Acquire that returned it needs no Abandon.
	Definite(err error) bool
}

// An Inspector is a Driver that can read who holds a key.
type Inspector interface {
	// Inspect reads key's unexpired lease: its holder (Key, Fence, Owner; the
	// Locker sets Expires) and how long it has left by the store's clock. It
	// returns an error wrapping distlock.ErrNotHeld when key is free.
	Inspect(ctx context.Context, key string) (h distlock.Holder, remaining time.Duration, err error)
}

// A Closer is a Driver with background work of its own. The Locker's Close calls
// it once, after every call in flight and every Abandon has returned.
type Closer interface {
	Close() error
}

// Config is what a Locker needs to know of its Driver.
type Config struct {
	// Backend names the Locker in its errors (the Backend of every
	// *distlock.OpError), such as "sqllock/postgres".
	Backend string
	// MaxKeyLen is the longest key in bytes; 0 means no limit.
	MaxKeyLen int
	// Drift is subtracted from every Expires: what the store's clock may run
	// ahead of the client's over one ttl. 0 when the store measures ttl with the
	// client's clock or no drift applies.
	Drift func(ttl time.Duration) time.Duration
	// CleanupTimeout bounds the clean-up of one abandoned Acquire (all of its
	// Abandon calls); 0 means DefaultCleanupTimeout.
	CleanupTimeout time.Duration
}

// DefaultCleanupTimeout is Config.CleanupTimeout's default.
const DefaultCleanupTimeout = 5 * time.Second
