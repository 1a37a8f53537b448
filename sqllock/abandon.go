package sqllock

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
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

// Bounds of the work after an acquire whose outcome is unknown, in a background
// goroutine that ends within endTimeout + cleanupTimeout.
const (
	endTimeout     = 5 * time.Second // ending the statement's session
	cleanupTimeout = 5 * time.Second // then releasing the row
	endPollMax     = 100 * time.Millisecond
)

// A session names a database session (one connection's server side).
type session struct {
	id int64 // PostgreSQL backend pid, MySQL connection id; 0: unknown
	// start is PostgreSQL's backend_start, so that a reused pid names no other
	// session. Zero for MySQL, whose connection ids are not reused while the server
	// runs.
	start time.Time
}

var (
	// errSessionLive: the session has not ended yet.
	errSessionLive = errors.New("sqllock: the database session has not ended yet")
	// errCannotEnd wraps the database's refusal to end a session.
	errCannotEnd = errors.New("sqllock: cannot end the database session")
)

// notSentError wraps an error that ended an acquire before its statement was sent:
// the statement had no effect.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

func notSent(err error) error { return &notSentError{err} }

// definite reports whether err leaves no doubt that the acquire had no effect.
func (l *Locker) definite(err error) bool {
	var ns *notSentError
	return errors.As(err, &ns) || l.d.definite(err)
}

// cleanup runs after an acquire whose outcome is unknown: it ends the session sess
// that the statement was sent on (bounded by endTimeout), then releases the row
// that token may own (bounded by cleanupTimeout), with fresh contexts, ignoring
// errors: if the release fails, the row expires by its ttl. If the session could
// not be named or ended (a pooler in between, no privilege, the database out of
// reach for endTimeout), the release still runs, and a statement that arrives later
// may hold the key until its ttl runs out (see the package doc).
func (l *Locker) cleanup(ctx context.Context, kh, key, token []byte, sess session) {
	base := context.WithoutCancel(ctx)
	if sess.id != 0 {
		ectx, cancel := context.WithTimeout(base, endTimeout)
		_ = l.endSession(ectx, sess)
		cancel()
	}
	cctx, cancel := context.WithTimeout(base, cleanupTimeout)
	defer cancel()
	_ = l.retry(cctx, func() error {
		_, err := l.d.release(cctx, kh, key, token)
		return err
	})
}

// endSession ends sess and waits until it is gone, retrying while it is still
// there or the database cannot be reached, until ctx ends or the database refuses.
func (l *Locker) endSession(ctx context.Context, sess session) error {
	sleep := retryBackoff
	for {
		err := l.d.endSession(ctx, sess)
		if err == nil || errors.Is(err, errCannotEnd) {
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
