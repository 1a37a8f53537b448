package sqllock

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/distlock/distlock/sqllock/internal/calls"
)

// An acquire whose outcome is unknown (the caller's deadline passed, the connection
// broke) may have committed, or may still be on its way: held up in a socket buffer
// or the network, it can reach the database after the driver closed the connection
// and commit then (the database reads what was sent before the close). A cleanup
// that releases the token's row once cannot see a statement that has not arrived.
// So the Locker first ends the database session the statement was sent on
// (pg_terminate_backend, KILL CONNECTION) and waits until it is gone: a session that
// is gone has committed or rolled back everything it will, and bytes that reach its
// closed socket later are discarded. Only then does it release the row.

// endPollMax is the longest pause between two looks at a session being ended.
const endPollMax = 100 * time.Millisecond

// definite reports whether err leaves no doubt that the acquire had no effect.
func (l *Locker) definite(err error) bool {
	var ns *notSentError
	return errors.As(err, &ns) || l.d.Definite(err)
}

// cleanup runs after an acquire whose outcome is unknown, or whose lease expired
// before its reply came: it ends the session sess that the statement was sent on
// (bounded by Options.EndSessionTimeout; skipped for a zero sess), then releases
// the row that r.Token may own (bounded by Options.CleanupTimeout), with fresh
// contexts, ignoring errors: if the release fails, the row expires by its ttl. If
// the session could not be named or ended (a pooler in between, no privilege, the
// database out of reach), the release still runs, and a statement that arrives
// later may hold the key until its ttl runs out (see the package doc).
func (l *Locker) cleanup(ctx context.Context, r Row, sess Session) {
	base := context.WithoutCancel(ctx)
	if sess.ID != 0 {
		ectx, cancel := context.WithTimeout(base, l.o.EndSessionTimeout)
		_ = l.endSession(ectx, sess)
		cancel()
	}
	cctx, cancel := context.WithTimeout(base, l.o.CleanupTimeout)
	defer cancel()
	_ = l.retry(cctx, func() error {
		_, err := l.d.Release(cctx, r)
		return err
	})
}

// endSession ends sess and waits until it is gone, retrying while it is still
// there or the database cannot be reached, until ctx ends or the database refuses.
func (l *Locker) endSession(ctx context.Context, sess Session) error {
	sleep := calls.RetryBackoff
	for {
		err := l.d.EndSession(ctx, sess)
		if err == nil || errors.Is(err, ErrCannotEnd) {
			return err
		}
		t := time.NewTimer(rand.N(sleep) + 1)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		}
		sleep = min(2*sleep, endPollMax)
	}
}
