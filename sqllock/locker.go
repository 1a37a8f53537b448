package sqllock

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync/atomic"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock/internal/calls"
)

// A Locker keeps leases as rows of one table: a row per key, whose fence only
// grows. It implements distlock.Locker, distlock.Inspector and distlock.Waiter
// (its Waits poll, sharing one poller per key), is safe for
// concurrent use, and does all expiry arithmetic with the database's clock.
// Applications use the Locker of a dialect package (sqllock/postgres,
// sqllock/mysql, sqllock/sqlite), which wraps this one.
type Locker struct {
	backend string // the Backend of its errors
	d       Dialect
	o       Options // with defaults
	calls   *calls.Group
	renewer *renewer              // when d is a BatchRenewer
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
func NewLocker(backend string, d Dialect, opts *Options) (*Locker, error) {
	if d == nil {
		return nil, &distlock.OpError{Backend: backend, Op: "New", Err: fmt.Errorf("%w: nil Dialect", distlock.ErrInvalid)}
	}
	o, err := opts.WithDefaults()
	if err != nil {
		return nil, &distlock.OpError{Backend: backend, Op: "New", Err: err}
	}
	l := &Locker{backend: backend, d: d, o: o, calls: calls.New()}
	if _, ok := d.(BatchRenewer); ok {
		l.renewer = &renewer{d: d, g: l.calls, stall: renewStall}
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
func (l *Locker) Close() error {
	l.calls.Close()
	return nil
}

// Table returns the name of the table that holds the lease rows.
func (l *Locker) Table() string { return l.o.Table }

// Owner returns the owner label that this Locker writes into the rows it acquires.
func (l *Locker) Owner() string { return l.o.Owner }

// opError is the error of op on key.
func (l *Locker) opError(op, key string, err error) error {
	return &distlock.OpError{Backend: l.backend, Op: op, Key: key, Err: err}
}

// row returns the row of key for token.
func row(key, token string) Row {
	h := sha256.Sum256([]byte(key))
	return Row{Hash: h[:], Key: []byte(key), Token: []byte(token)}
}

// retry runs op with calls.Retry and the dialect's classification of errors.
func (l *Locker) retry(ctx context.Context, op func() error) error {
	return calls.Retry(ctx, l.d.Retryable, op)
}
