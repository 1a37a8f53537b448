package sqllock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/sqllock/sqldialect"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// A Locker keeps leases as rows of one table: a row per key, whose fence only
// grows. It implements distlock.Locker, distlock.Inspector and distlock.Waiter
// (its Waits poll, sharing one poller per key), is safe for
// concurrent use, and does all expiry arithmetic with the database's clock.
// Applications use the Locker of a dialect package (sqllock/postgres,
// sqllock/mysql, sqllock/sqlite), which wraps this one.
type Locker struct {
	backend string // the Backend of its errors
	d       sqldialect.Dialect
	o       Options               // with defaults
	rows    *rows                 // the core's Driver
	core    *driver.Locker        // over rows
	calls   *driver.Calls         // core's
	waits   atomic.Pointer[waits] // made by the first Wait
}

var (
	_ distlock.Locker    = (*Locker)(nil)
	_ distlock.Inspector = (*Locker)(nil)
	_ distlock.Waiter    = (*Locker)(nil)
)

// NewLocker returns a Locker that runs its statements with d. backend names it in
// its errors (the Backend of every *distlock.OpError it returns, such as
// "sqllock/postgres"). opts are the options that d was built with; invalid options
// are the returned error, an *distlock.OpError wrapping distlock.ErrInvalid. It does
// no I/O: the dialect package has prepared the table.
func NewLocker(backend string, d sqldialect.Dialect, opts *Options) (*Locker, error) {
	if d == nil {
		return nil, &distlock.OpError{Backend: backend, Op: "New", Err: fmt.Errorf("%w: nil sqldialect.Dialect", distlock.ErrInvalid)}
	}
	o, err := opts.WithDefaults()
	if err != nil {
		return nil, &distlock.OpError{Backend: backend, Op: "New", Err: err}
	}
	r := &rows{d: d, o: o}
	core, err := driver.NewLocker(r, driver.Config{
		Backend:        backend,
		MaxKeyLen:      MaxKeyLen,
		CleanupTimeout: o.EndSessionTimeout + o.CleanupTimeout,
	})
	if err != nil {
		return nil, err
	}
	l := &Locker{backend: backend, d: d, o: o, rows: r, core: core, calls: core.Calls()}
	if br, ok := d.(sqldialect.BatchRenewer); ok {
		r.renews = newRenews(br, d, renewStall, l.calls.Go)
	}
	return l, nil
}

// Close stops the Locker's background work and waits for it: calls in flight
// return (with an error wrapping distlock.ErrClosed unless they were done), and the
// releases of half-made locks that failed TryLocks started run to their end
// (bounded by Options.EndSessionTimeout plus Options.CleanupTimeout), so that none
// is left holding a key. It does not close the database handle, and it does not
// release held leases: each stays held until its Unlock (before Close) or its ttl.
// Every call after Close returns an *distlock.OpError wrapping distlock.ErrClosed.
// Close is idempotent: a second call waits for the first one and returns nil.
func (l *Locker) Close() error { return l.core.Close() }

// TryLock makes one attempt to acquire key for ttl: a single statement that inserts
// the key's row (with a fence above the table's high-water mark) or takes it over
// when it has expired by the database's clock, incrementing its fence. It returns an
// error wrapping distlock.ErrLocked when another lease holds key. Keys are opaque
// bytes of 1 to MaxKeyLen bytes.
//
// When the outcome is unknown (ctx ended, the connection broke), or the reply came
// after ttl (the lease had already expired: TryLock returns an error, not a Lease),
// TryLock releases what its statement may have taken, in the background (see the
// package doc, "Abandoned acquires"); Close waits for that.
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	w := l.waits.Load()
	if w != nil {
		w.attempt(key)
	}
	lease, err := l.core.TryLock(ctx, key, ttl)
	if w != nil && err != nil && !errors.Is(err, distlock.ErrLocked) {
		w.free(key) // nobody may be about to take the key: the next Wait tries
	}
	return lease, err
}

// Renew moves the lease's expiry to ttl from now (by the database's clock) if the
// lease still owns its key, and returns the new Lease (same Token and Fence) with
// Expires = the time before the statement was sent + ttl. It never shortens what the
// database holds: the row keeps the later of its expiry and now + ttl, so that after
// a Renew whose outcome is unknown (a lost reply) the old Lease's Expires is still a
// bound. A reply that comes after ttl is an error (the old Lease still stands), not
// a Lease that has already expired. It returns an error wrapping
// distlock.ErrNotHeld when the lease expired (at once, without a statement, once its
// Expires has passed), was released or another lease holds the key.
func (l *Locker) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	return l.core.Renew(ctx, lease, ttl)
}

// Unlock releases the lease if it still owns its key: it sets the row's expiry to
// the database's now, keeping the row and its fence. It returns an error wrapping
// distlock.ErrNotHeld, and changes nothing, when the lease was no longer held.
func (l *Locker) Unlock(ctx context.Context, lease distlock.Lease) error {
	if err := l.core.Unlock(ctx, lease); err != nil {
		return err
	}
	if w := l.waits.Load(); w != nil {
		w.free(lease.Key) // wake a Wait of the key now, not at the next read
	}
	return nil
}

// Inspect returns the current holder of key, or an error wrapping
// distlock.ErrNotHeld when key is free. Holder.Expires is the local time at which the
// row expires by the database's clock, estimated from a time taken before the query.
func (l *Locker) Inspect(ctx context.Context, key string) (distlock.Holder, error) {
	return l.core.Inspect(ctx, key)
}

// Table returns the name of the table that holds the lease rows.
func (l *Locker) Table() string { return l.o.Table }

// Owner returns the owner label that this Locker writes into the rows it acquires.
func (l *Locker) Owner() string { return l.o.Owner }

// opError is the error of op on key.
func (l *Locker) opError(op, key string, err error) error {
	return &distlock.OpError{Backend: l.backend, Op: op, Key: key, Err: err}
}

// retry runs op with driver.Retry and the dialect's classification of errors.
func (l *Locker) retry(ctx context.Context, op func() error) error {
	return driver.Retry(ctx, l.d.Retryable, op)
}
