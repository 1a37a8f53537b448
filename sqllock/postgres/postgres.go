package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/waitq"
	"github.com/distlock/distlock/sqllock"
	"github.com/jackc/pgx/v5/pgxpool"
)

// backend is the Backend of the Locker's errors.
const backend = "sqllock/postgres"

// A Locker keeps leases as rows of a table in PostgreSQL. It implements
// distlock.Locker, distlock.Inspector and distlock.Waiter, and is safe for
// concurrent use. The zero value is not usable; call New, and Close when done.
type Locker struct {
	core  *sqllock.Locker
	d     *dialect
	ln    *listener
	calls *driver.Calls // the Waits in flight
	// waiters wakes the Waits of a key one at a time (by payload): a release
	// wakes the first, the next one wakes only when no TryLock of the key follows
	// (see internal/waitq), so that a herd of waiters sends one TryLock per
	// release, not one each.
	waiters *waitq.Queue
	// waited is set by the first Wait, before it joins waiters: until then
	// TryLock has no handoff to end, and skips the key's payload.
	waited atomic.Bool

	testChecked func() // tests: called by Wait when it has found the key held
}

var (
	_ distlock.Locker    = (*Locker)(nil)
	_ distlock.Inspector = (*Locker)(nil)
	_ distlock.Waiter    = (*Locker)(nil)
)

// New returns a Locker whose leases are rows of a table in the PostgreSQL (14 or
// later) database that pool connects to. It creates the table if it is missing
// (unless Options.SkipCreateTable) and adds the table's fence high-water row if it
// is missing, with ctx. The pool stays the caller's: close it after the Locker. A
// nil pool or invalid opts is the returned error, an *distlock.OpError wrapping
// distlock.ErrInvalid that names the bad value.
//
// TryLock is one statement, an UPDATE of the key's row when it has expired (fence
// + 1) that also tells a held row; only a key's first TryLock (and one whose row
// Prune deleted meanwhile) runs a second one, which inserts the row. Unlock is one
// UPDATE. Concurrent TryLocks of one Locker share round trips and commits (see
// the package doc). Expiry uses the database's now(). Wait
// opens one extra connection with the pool's connection settings, outside the
// pool, kept while any Wait call is in progress and for 5s after.
func New(ctx context.Context, pool *pgxpool.Pool, opts *sqllock.Options) (*Locker, error) {
	if pool == nil {
		return nil, newError(fmt.Errorf("%w: nil *pgxpool.Pool", distlock.ErrInvalid))
	}
	o, err := opts.WithDefaults()
	if err != nil {
		return nil, newError(err)
	}
	d := newDialect(pool, o.Owner, o.Table)
	if err := d.setup(ctx, o.SkipCreateTable); err != nil {
		return nil, newError(fmt.Errorf("table %s: %w", o.Table, err))
	}
	core, err := sqllock.NewLocker(backend, d, &o)
	if err != nil {
		return nil, err
	}
	q := waitq.New(0)
	return &Locker{
		core:    core,
		d:       d,
		ln:      &listener{pool: pool, listen: d.sql.listen, table: d.sql.tableID, idle: listenIdle, ping: listenPing, q: q},
		calls:   driver.NewCalls(),
		waiters: q,
	}, nil
}

func newError(err error) error {
	return &distlock.OpError{Backend: backend, Op: "New", Err: err}
}

// DDL returns the statements that create the lease table named table (empty:
// sqllock.DefaultTable) and its fence high-water row, separated by semicolons, for
// schemas managed by migrations (then set Options.SkipCreateTable). A table name
// that sqllock.Options rejects is an *distlock.OpError wrapping
// distlock.ErrInvalid. For the default table:
//
//	CREATE TABLE IF NOT EXISTS "distlock_leases" (
//		key_hash bytea PRIMARY KEY,
//		lock_key bytea NOT NULL,
//		token bytea NOT NULL,
//		fence bigint NOT NULL,
//		expires_at timestamptz NOT NULL,
//		owner text NOT NULL
//	);
//	INSERT INTO "distlock_leases" (key_hash, lock_key, token, fence, expires_at, owner)
//	VALUES (decode('0000000000000000000000000000000000000000000000000000000000000000', 'hex'), '', '', 0, 'epoch', 'distlock: fence high-water mark')
//	ON CONFLICT (key_hash) DO NOTHING;
func DDL(table string) (string, error) {
	o, err := (&sqllock.Options{Table: table}).WithDefaults()
	if err != nil {
		return "", &distlock.OpError{Backend: backend, Op: "DDL", Err: err}
	}
	return strings.Join(newStatements(o.Table).ddl(), ";\n") + ";\n", nil
}

// Close stops the Locker's background work and waits for it: Waits and other calls
// in flight return (with an error wrapping distlock.ErrClosed unless they were
// done), the connection that Waits listen on closes, and the releases of
// half-made locks that failed TryLocks started run to their end (see
// sqllock.Locker.Close). It does not close the pool, and it does not release held
// leases. Every call after Close returns an *distlock.OpError wrapping
// distlock.ErrClosed. Close is idempotent: a second call waits for the first one
// and returns nil.
func (l *Locker) Close() error {
	l.calls.Close() // the Waits, which need the listener
	l.waiters.Close()
	l.ln.close()
	err := l.core.Close()
	l.d.batches.Wait() // their callers have all returned: each batch's context has ended
	return err
}

// TryLock makes one attempt to acquire key for ttl; see sqllock.Locker.TryLock.
// It ends the handoff of a release to this Locker's Waits on key; when it fails
// for a reason other than the key being held, it wakes the next Wait.
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	if l.waited.Load() {
		l.waiters.Attempt(payload(key))
	}
	lease, err := l.core.TryLock(ctx, key, ttl)
	if err != nil && !errors.Is(err, distlock.ErrLocked) && l.waited.Load() {
		l.waiters.AttemptFailed(payload(key))
	}
	return lease, err
}

// Renew extends a held lease to ttl from now, never shortening what the database
// holds; see sqllock.Locker.Renew.
func (l *Locker) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	return l.core.Renew(ctx, lease, ttl)
}

// Unlock releases a held lease and notifies the Waits on its key, on every client
// of the table (only when one has registered the key: see the package doc); see
// sqllock.Locker.Unlock.
func (l *Locker) Unlock(ctx context.Context, lease distlock.Lease) error {
	return l.core.Unlock(ctx, lease)
}

// Inspect returns the current holder of key; see sqllock.Locker.Inspect.
func (l *Locker) Inspect(ctx context.Context, key string) (distlock.Holder, error) {
	return l.core.Inspect(ctx, key)
}

// Prune deletes the rows of keys free for longer than olderThan, keeping fences
// increasing; see sqllock.Locker.Prune.
func (l *Locker) Prune(ctx context.Context, olderThan time.Duration) (int64, error) {
	return l.core.Prune(ctx, olderThan)
}

// Table returns the name of the table that holds the lease rows.
func (l *Locker) Table() string { return l.core.Table() }

// Owner returns the owner label that this Locker writes into the rows it acquires.
func (l *Locker) Owner() string { return l.core.Owner() }
