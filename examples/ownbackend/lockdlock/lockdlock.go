// Package lockdlock is a distlock backend over a lockd server (package lockd): a
// distlock.Locker, Waiter and Inspector that talks lockd's line protocol over TCP.
// Its test proves it with the whole conformance suite, faults included; read it as
// an example of what the author of a backend writes.
//
// It is built on package driver: wire.go makes one attempt of each operation
// (driver.Driver), and driver.Locker does everything else the contract asks
// (validation, Expires from before the request, late replies, Renews of lapsed
// leases, the background clean-up of an abandoned TryLock, errors, Close).
//
// Each request opens its own connection, so that no connection state survives a
// server restart or a cut, and closes it when the request returns. A request's
// deadline is the earliest of its context's deadline and Options.Timeout; LOCK and
// RENEW also give up at ttl, since a reply after that is useless. The clean-up of a
// TryLock that gave up after sending its request sends CANCEL, which also makes the
// server refuse that LOCK if it arrives later.
package lockdlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// MaxKeyLen is the longest key, in bytes, that a Locker accepts (the server's limit).
const MaxKeyLen = 4096

// Backend is the name in every error's distlock.OpError.
const Backend = "lockdlock"

// Options configure a Locker. A nil *Options means the defaults.
type Options struct {
	// Timeout bounds every request whose context has no earlier deadline. Zero
	// means 5s.
	Timeout time.Duration
	// CleanupTimeout bounds the removal of a lock that an abandoned TryLock may have
	// made. Zero means 5s.
	CleanupTimeout time.Duration
}

// A Locker is a client of one lockd server. It is safe for concurrent use.
type Locker struct {
	w    *wire
	core *driver.Locker
}

var (
	_ distlock.Locker    = (*Locker)(nil)
	_ distlock.Waiter    = (*Locker)(nil)
	_ distlock.Inspector = (*Locker)(nil)
)

// New returns a Locker for the lockd server at addr (host:port). It does not connect:
// every request dials. Bad options give an error wrapping distlock.ErrInvalid.
func New(addr string, opts *Options) (*Locker, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fail("New", "", fmt.Errorf("%w: address %q: %v", distlock.ErrInvalid, addr, err))
	}
	if o.Timeout < 0 || o.CleanupTimeout < 0 {
		return nil, fail("New", "", fmt.Errorf("%w: negative Options.Timeout %v or CleanupTimeout %v", distlock.ErrInvalid, o.Timeout, o.CleanupTimeout))
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	w := &wire{addr: addr, timeout: o.Timeout}
	core, err := driver.NewLocker(w, driver.Config{Backend: Backend, MaxKeyLen: MaxKeyLen, CleanupTimeout: o.CleanupTimeout})
	if err != nil {
		return nil, err
	}
	return &Locker{w: w, core: core}, nil
}

// Close ends the calls in flight (they return an error wrapping
// distlock.ErrClosed) and returns once the clean-ups of abandoned TryLocks have
// finished (each bounded by Options.CleanupTimeout). Held leases stay held until
// their ttl. Every later call returns an error wrapping distlock.ErrClosed.
func (l *Locker) Close() error { return l.core.Close() }

// TryLock makes one attempt to acquire key for ttl. It returns an error wrapping
// distlock.ErrLocked when another owner holds key.
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	return l.core.TryLock(ctx, key, ttl)
}

// Renew extends a held lease to ttl from now. The server never shortens the hold, so
// after an error other than distlock.ErrNotHeld the old lease stays valid until its
// Expires. A lease whose Expires has passed is not renewed (distlock.ErrNotHeld).
func (l *Locker) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	return l.core.Renew(ctx, lease, ttl)
}

// Unlock releases a held lease; it returns an error wrapping distlock.ErrNotHeld when
// the lease was no longer held.
func (l *Locker) Unlock(ctx context.Context, lease distlock.Lease) error {
	return l.core.Unlock(ctx, lease)
}

// Inspect returns the holder of key, or an error wrapping distlock.ErrNotHeld when
// key is free. lockd keeps no owner label.
func (l *Locker) Inspect(ctx context.Context, key string) (distlock.Holder, error) {
	return l.core.Inspect(ctx, key)
}

// Wait returns nil when key may be free: it was released, its holder's expiry
// passed, or Options.Timeout passed (a hint; call TryLock). When ctx ends first it
// returns an error wrapping errors.Join(distlock.ErrLocked, ctx.Err()).
func (l *Locker) Wait(ctx context.Context, key string) error {
	cctx, end, err := l.core.Calls().Begin(ctx)
	if err != nil {
		return fail("Wait", key, err)
	}
	defer end()
	if err := driver.ValidateKey(key, MaxKeyLen); err != nil {
		return fail("Wait", key, err)
	}
	reply, _, err := l.w.roundTrip(cctx, 0, request("WAIT", key, "", 0))
	switch {
	case err == nil && reply == "FREE":
		return nil
	case err == nil:
		return fail("Wait", key, errProtocol(reply))
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil // Wait's own bound passed
	case cctx.Err() != nil && ctx.Err() != nil:
		return fail("Wait", key, errors.Join(distlock.ErrLocked, err))
	default:
		return fail("Wait", key, driver.Err(cctx, err))
	}
}

// fail wraps err in the *distlock.OpError every call returns.
func fail(op, key string, err error) error {
	return &distlock.OpError{Backend: Backend, Op: op, Key: key, Err: err}
}
