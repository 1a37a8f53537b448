package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/sqllock/sqldialect"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/sqllock"
)

// Wait returns nil when key may be free: its lease was released (Unlock notified),
// it expired, or it was free when Wait looked. It listens for the release
// notifications and registers the key (so that Unlocks notify it) first, and only
// then reads the key's row, so that it cannot miss a release between the two; it
// waits at most the holder's remaining ttl by the database's clock. A release
// wakes one Wait of the key on this Locker, the first to have started; the next
// one wakes only when no TryLock of the key follows within 20ms (the woken caller
// gave up) or that TryLock failed other than with distlock.ErrLocked, so that a
// herd of waiters sends one TryLock per Locker per release. When ctx ends while
// the key is held it returns errors.Join(distlock.ErrLocked, ctx.Err()). A nil
// return is a hint, not a lease: call TryLock. The Waits of a Locker share one
// listening connection.
func (l *Locker) Wait(ctx context.Context, key string) error {
	cctx, end, err := l.calls.Begin(ctx)
	if err != nil {
		return &distlock.OpError{Backend: backend, Op: "Wait", Key: key, Err: err}
	}
	defer end()
	if err := l.wait(cctx, key); err != nil {
		switch {
		case errors.Is(err, distlock.ErrInvalid):
		case errors.Is(context.Cause(cctx), distlock.ErrClosed):
			err = distlock.ErrClosed
		case ctx.Err() != nil:
			err = errors.Join(distlock.ErrLocked, ctx.Err())
		}
		return &distlock.OpError{Backend: backend, Op: "Wait", Key: key, Err: err}
	}
	return nil
}

func (l *Locker) wait(ctx context.Context, key string) error {
	if err := driver.ValidateKey(key, sqllock.MaxKeyLen); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r := row(key)
	p := hex.EncodeToString(r.Hash)
	w, err := l.ln.subscribe(ctx, p, keyID(r.Hash))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer l.ln.unsubscribe(w)
	// In line before the row is read: a release after the read wakes the first
	// waiter of the line, which may be this one.
	l.waited.Store(true)
	qw := l.waiters.Join(p)
	defer qw.Leave()

	var st sqldialect.RowState
	var found bool
	err = driver.Retry(ctx, l.d.Retryable, func() error {
		var err error
		st, found, err = l.d.Inspect(ctx, r)
		return err
	})
	if err != nil {
		return err
	}
	if !found {
		return nil
	}
	if l.testChecked != nil {
		l.testChecked()
	}
	// The row expires st.Remaining after the database read its clock, which was
	// after this point: waiting that long from here is never too short.
	t := time.NewTimer(st.Remaining)
	defer t.Stop()
	select {
	case <-qw.Woken(): // released (this waiter's turn), or the Locker closed
		return nil
	case <-w.ch: // the listening connection failed: it may have missed a release
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// payload returns the payload of key's release notifications: the hex SHA-256 of
// key, as row(key).Hash.
func payload(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

// row returns the row of key, without a token.
func row(key string) sqldialect.Row {
	h := sha256.Sum256([]byte(key))
	return sqldialect.Row{Hash: h[:], Key: []byte(key)}
}
