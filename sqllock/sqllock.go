package sqllock

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/distlock/distlock"
)

// Retries of statements that the database rolled back because of a serialization
// failure, a deadlock or (SQLite) a busy database.
const (
	maxAttempts  = 5
	retryBackoff = 5 * time.Millisecond // first sleep; doubles, with full jitter
)

// A dialect runs the statements of one database. key is the key's bytes, kh its
// SHA-256 (the primary key). Every statement checks lock_key = key as well as the
// hash. The methods make one attempt; the Locker retries.
type dialect interface {
	// acquire runs the single acquiring statement: insert the row, or take it over
	// when it has expired. won reports whether token now owns the key; fence is then
	// its fence. sess names the database session that the statement was sent on
	// (learned before it was sent; zero when it cannot be named). An error from
	// before the statement was sent wraps it with notSent.
	acquire(ctx context.Context, kh, key, token []byte, ttl time.Duration) (fence int64, won bool, sess session, err error)
	// endSession ends the database session sess and returns nil once it has ended
	// (or had ended before): no statement sent on it can commit after that. It
	// returns errSessionLive while the session is still there, and an error
	// wrapping errCannotEnd when the database refused.
	endSession(ctx context.Context, sess session) error
	// renew moves the expiry of the row that token owns to the later of its
	// expiry and now + ttl (never earlier); held is false when token does not own
	// an unexpired row.
	renew(ctx context.Context, kh, key, token []byte, ttl time.Duration) (held bool, err error)
	// release sets the expiry of the row that token owns to now, keeping the row and
	// its fence; held is false when token did not own an unexpired row.
	release(ctx context.Context, kh, key, token []byte) (held bool, err error)
	// inspect reads the unexpired row of key; found is false when key is free.
	inspect(ctx context.Context, kh, key []byte) (h holder, found bool, err error)
	// retryable reports whether err means that the database rolled the statement
	// back and it may simply run again (serialization failure, deadlock, busy).
	retryable(err error) bool
	// definite reports whether err was reported by the database for a statement
	// that therefore had no effect; any other error leaves the outcome unknown.
	definite(err error) bool
}

// holder is a row as inspect reads it.
type holder struct {
	fence     int64
	remaining time.Duration // expires_at minus the database's now
	owner     string
}

// A Locker keeps leases as rows of one table: a row per key, never deleted, so that
// a key's fence never resets. It implements distlock.Locker and distlock.Inspector
// (PostgresLocker adds distlock.Waiter). It is safe for concurrent use. All expiry
// arithmetic uses the database's clock.
type Locker struct {
	d        dialect
	opts     resolved
	cleanups sync.WaitGroup // background removals of half-made locks
}

var (
	_ distlock.Locker    = (*Locker)(nil)
	_ distlock.Inspector = (*Locker)(nil)
)

func newLocker(d dialect, opts resolved) *Locker {
	return &Locker{d: d, opts: opts}
}

// waitCleanups waits until the background cleanups have finished (for tests).
func (l *Locker) waitCleanups() { l.cleanups.Wait() }

// Table returns the name of the table that holds the lease rows.
func (l *Locker) Table() string { return l.opts.name() }

// Owner returns the owner label that this Locker writes into the rows it acquires.
func (l *Locker) Owner() string { return l.opts.owner }

func keyHash(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// TryLock makes one attempt to acquire key for ttl: a single statement that inserts
// the key's row or takes it over when it has expired by the database's clock, and
// increments its fence. It returns an error wrapping distlock.ErrLocked when another
// lease holds key. Keys are opaque bytes of 1 to MaxKeyLen bytes.
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	start := time.Now() // first: Expires must not count from later than the caller's start
	if err := distlock.ValidateKey(key, MaxKeyLen); err != nil {
		return distlock.Lease{}, err
	}
	if err := distlock.ValidateTTL(ttl); err != nil {
		return distlock.Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return distlock.Lease{}, fmt.Errorf("sqllock: TryLock %s: %w", quoteKey(key), err)
	}
	token := distlock.NewToken()
	kh, kb, tb := keyHash(key), []byte(key), []byte(token)
	var fence int64
	var won bool
	var sess session
	err := l.retry(ctx, func() error {
		var err error
		fence, won, sess, err = l.d.acquire(ctx, kh, kb, tb, ttl)
		return err
	})
	if err != nil {
		if !l.definite(err) {
			// The statement may have committed, or may still reach the database:
			// end its session, then remove our half-made lock, in the background
			// (so that TryLock returns promptly) and with fresh bounded contexts,
			// not ctx, which may be what ended the attempt.
			l.cleanups.Go(func() { l.cleanup(ctx, kh, kb, tb, sess) })
		}
		return distlock.Lease{}, fmt.Errorf("sqllock: TryLock %s: %w", quoteKey(key), err)
	}
	if !won {
		return distlock.Lease{}, fmt.Errorf("sqllock: TryLock %s: %w", quoteKey(key), distlock.ErrLocked)
	}
	if fence <= 0 {
		// Cannot happen: fences start at 1 and only grow.
		return distlock.Lease{}, fmt.Errorf("sqllock: TryLock %s: the database returned fence %d", quoteKey(key), fence)
	}
	expires := start.Add(ttl)
	if now := time.Now(); !expires.After(now) {
		// The lease ended before its reply came: give its row back, as after an
		// abandoned attempt (the statement has committed: no session to end).
		l.cleanups.Go(func() { l.cleanup(ctx, kh, kb, tb, session{}) })
		return distlock.Lease{}, fmt.Errorf("sqllock: TryLock %s: the reply came %v after the request, later than ttl %v: the lease had already expired; its row is being released",
			quoteKey(key), now.Sub(start), ttl)
	}
	return distlock.Lease{Key: key, Token: token, Fence: uint64(fence), Expires: expires}, nil
}

// Renew moves the lease's expiry to ttl from now (by the database's clock) if the
// lease still owns its key, and returns the new Lease (same Token and Fence) with
// Expires = the time before the statement was sent + ttl. It never shortens what the
// database holds: the row keeps the later of its expiry and now + ttl, so that after
// a Renew whose outcome is unknown (a lost reply) the old Lease's Expires is still a
// bound. It returns an error wrapping distlock.ErrNotHeld when the lease expired, was
// released or another lease holds the key.
func (l *Locker) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	start := time.Now()
	if err := distlock.ValidateLease(lease); err != nil {
		return distlock.Lease{}, err
	}
	if err := distlock.ValidateTTL(ttl); err != nil {
		return distlock.Lease{}, err
	}
	if err := distlock.ValidateKey(lease.Key, MaxKeyLen); err != nil {
		return distlock.Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return distlock.Lease{}, fmt.Errorf("sqllock: Renew %s: %w", quoteKey(lease.Key), err)
	}
	kh, kb, tb := keyHash(lease.Key), []byte(lease.Key), []byte(lease.Token)
	var held bool
	err := l.retry(ctx, func() error {
		var err error
		held, err = l.d.renew(ctx, kh, kb, tb, ttl)
		return err
	})
	if err != nil {
		return distlock.Lease{}, fmt.Errorf("sqllock: Renew %s: %w", quoteKey(lease.Key), err)
	}
	if !held {
		return distlock.Lease{}, fmt.Errorf("sqllock: Renew %s: %w", quoteKey(lease.Key), distlock.ErrNotHeld)
	}
	expires := start.Add(ttl)
	if now := time.Now(); !expires.After(now) {
		// The database kept the row at least until the old Expires (a renewal
		// never shortens), so the old Lease still bounds the hold.
		return distlock.Lease{}, fmt.Errorf("sqllock: Renew %s: the reply came %v after the request, later than ttl %v: the renewed lease had already expired (the old Lease's Expires still stands)",
			quoteKey(lease.Key), now.Sub(start), ttl)
	}
	lease.Expires = expires
	return lease, nil
}

// Unlock releases the lease if it still owns its key: it sets the row's expiry to
// the database's now, keeping the row and its fence. It returns an error wrapping
// distlock.ErrNotHeld, and changes nothing, when the lease was no longer held.
func (l *Locker) Unlock(ctx context.Context, lease distlock.Lease) error {
	if err := distlock.ValidateLease(lease); err != nil {
		return err
	}
	if err := distlock.ValidateKey(lease.Key, MaxKeyLen); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqllock: Unlock %s: %w", quoteKey(lease.Key), err)
	}
	kh, kb, tb := keyHash(lease.Key), []byte(lease.Key), []byte(lease.Token)
	var held bool
	err := l.retry(ctx, func() error {
		var err error
		held, err = l.d.release(ctx, kh, kb, tb)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqllock: Unlock %s: %w", quoteKey(lease.Key), err)
	}
	if !held {
		return fmt.Errorf("sqllock: Unlock %s: %w", quoteKey(lease.Key), distlock.ErrNotHeld)
	}
	return nil
}

// Inspect returns the current holder of key, or an error wrapping
// distlock.ErrNotHeld when key is free. Holder.Expires is the local time at which the
// row expires by the database's clock, estimated from a time taken before the query.
func (l *Locker) Inspect(ctx context.Context, key string) (distlock.Holder, error) {
	start := time.Now()
	if err := distlock.ValidateKey(key, MaxKeyLen); err != nil {
		return distlock.Holder{}, err
	}
	if err := ctx.Err(); err != nil {
		return distlock.Holder{}, fmt.Errorf("sqllock: Inspect %s: %w", quoteKey(key), err)
	}
	kh, kb := keyHash(key), []byte(key)
	var h holder
	var found bool
	err := l.retry(ctx, func() error {
		var err error
		h, found, err = l.d.inspect(ctx, kh, kb)
		return err
	})
	if err != nil {
		return distlock.Holder{}, fmt.Errorf("sqllock: Inspect %s: %w", quoteKey(key), err)
	}
	if !found {
		return distlock.Holder{}, fmt.Errorf("sqllock: Inspect %s: %w", quoteKey(key), distlock.ErrNotHeld)
	}
	return distlock.Holder{Key: key, Fence: uint64(h.fence), Expires: start.Add(h.remaining), Owner: h.owner}, nil
}

// retry runs op until it succeeds, fails with an error that is not retryable, ctx
// ends, or maxAttempts attempts were made, sleeping a short jittered backoff between
// attempts. It returns op's last error.
func (l *Locker) retry(ctx context.Context, op func() error) error {
	sleep := retryBackoff
	for attempt := 1; ; attempt++ {
		err := op()
		if err == nil || attempt >= maxAttempts || !l.d.retryable(err) {
			return err
		}
		t := time.NewTimer(rand.N(sleep) + 1)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		}
		sleep *= 2
	}
}

// micros returns d in whole microseconds, rounded up, so that a row never expires
// before the lease's local Expires.
func micros(d time.Duration) int64 {
	us := d / time.Microsecond
	if d%time.Microsecond != 0 {
		us++
	}
	return int64(us)
}

// quoteKey quotes key for an error message, shortened if it is long.
func quoteKey(key string) string {
	const max = 64
	if len(key) <= max {
		return strconv.Quote(key)
	}
	return fmt.Sprintf("%q... (%d bytes)", key[:max], len(key))
}
