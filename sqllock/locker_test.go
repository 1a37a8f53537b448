package sqllock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/sqllock/sqldialect"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// requireOpError checks that err is an *distlock.OpError of the fake backend, op
// and key that wraps want.
func requireOpError(t *testing.T, err error, op, key string, want error) {
	t.Helper()
	require.ErrorIs(t, err, want)
	var oe *distlock.OpError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "sqllock/fake", oe.Backend)
	require.Equal(t, op, oe.Op)
	require.Equal(t, key, oe.Key)
}

// TestReplyAfterTTL: when the reply comes after the ttl, TryLock and Renew return an
// error that is neither ErrLocked nor ErrNotHeld instead of a lease that has already
// expired, and TryLock releases the row it took.
func TestReplyAfterTTL(t *testing.T) {
	const ttl = 20 * time.Millisecond
	d := &fakeDialect{
		acquire: func(context.Context) (int64, bool, sqldialect.Session, error) {
			time.Sleep(2 * ttl) // the database's reply takes that long
			return 1, true, sqldialect.Session{}, nil
		},
		renew: func(context.Context) (bool, error) {
			time.Sleep(2 * ttl)
			return true, nil
		},
	}
	l := newFake(t, d, nil)
	_, err := l.TryLock(t.Context(), "k", ttl)
	require.Error(t, err, "TryLock whose reply came after its ttl returned a lease")
	require.False(t, errors.Is(err, distlock.ErrLocked) || errors.Is(err, distlock.ErrNotHeld), "TryLock: %v", err)
	lease := distlock.Lease{Key: "k", Token: "t", Fence: 1, Expires: time.Now().Add(time.Minute)}
	_, err = l.Renew(t.Context(), lease, ttl)
	require.Error(t, err, "Renew whose reply came after its ttl returned a lease")
	require.False(t, errors.Is(err, distlock.ErrLocked) || errors.Is(err, distlock.ErrNotHeld), "Renew: %v", err)
	require.NoError(t, l.Close()) // waits for the release
	require.ElementsMatch(t, []string{"acquire", "release", "renew"}, strings.Split(d.called(), ","),
		"TryLock did not release the row of its expired lease")
}

// TestCleanupEndsSessionFirst: the cleanup of an acquire whose outcome is unknown
// waits until the statement's session has ended (retrying while it is still there
// or the database cannot be reached), then releases; it releases at once when the
// session has no name, and still releases when the database refuses to end it. An
// acquire that certainly had no effect leaves nothing to clean up.
func TestCleanupEndsSessionFirst(t *testing.T) {
	unknown := errors.New("connection reset")
	refused := fmt.Errorf("%w 42: permission denied", sqldialect.ErrCannotEnd)
	for _, tc := range []struct {
		name string
		sess sqldialect.Session
		err  error // of the acquire
		ends []error
		want string
	}{
		{"ends", sqldialect.Session{ID: 42}, unknown, nil, "acquire,end,release"},
		{"retries until gone", sqldialect.Session{ID: 42}, unknown, []error{sqldialect.ErrSessionLive, unknown, sqldialect.ErrSessionLive, nil}, "acquire,end,end,end,end,release"},
		{"refused", sqldialect.Session{ID: 42}, unknown, []error{refused}, "acquire,end,release"},
		{"unnamed", sqldialect.Session{}, unknown, nil, "acquire,release"},
		{"not sent", sqldialect.Session{ID: 42}, driver.NotSent(unknown), nil, "acquire"},
		{"definite", sqldialect.Session{ID: 42}, errDefinite, nil, "acquire"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ends := tc.ends
			d := &fakeDialect{
				acquire: func(context.Context) (int64, bool, sqldialect.Session, error) { return 0, false, tc.sess, tc.err },
				end: func() error {
					if len(ends) == 0 {
						return nil
					}
					err := ends[0]
					ends = ends[1:]
					return err
				},
				definite: func(err error) bool { return errors.Is(err, errDefinite) },
			}
			l := newFake(t, d, nil)
			_, err := l.TryLock(t.Context(), "k", time.Minute)
			requireOpError(t, err, "TryLock", "k", tc.err)
			require.NoError(t, l.Close()) // waits for the cleanup
			require.Equal(t, tc.want, d.called())
		})
	}
}

var errDefinite = errors.New("the database refused the statement")

// TestEndSessionGivesUp: a session that never ends is waited for until
// Options.EndSessionTimeout, not longer; the row is released after that.
func TestEndSessionGivesUp(t *testing.T) {
	d := &fakeDialect{
		acquire: func(context.Context) (int64, bool, sqldialect.Session, error) {
			return 0, false, sqldialect.Session{ID: 42}, errors.New("connection reset")
		},
		end: func() error { return sqldialect.ErrSessionLive },
	}
	l := newFake(t, d, &Options{EndSessionTimeout: 200 * time.Millisecond})
	start := time.Now()
	_, err := l.TryLock(t.Context(), "k", time.Minute)
	require.Error(t, err)
	require.NoError(t, l.Close())
	took := time.Since(start)
	require.Less(t, took, 2*time.Second, "the cleanup of a session that stays, with EndSessionTimeout 200ms")
	calls := d.called()
	require.True(t, strings.HasSuffix(calls, ",end,release"), "calls %q", calls)
	require.GreaterOrEqual(t, strings.Count(calls, "end"), 3, "looks at the session in 200ms")
}

// TestClose: Close cancels a call in flight, which returns ErrClosed, and waits for
// the cleanup that the call started; every later call returns an *OpError wrapping
// ErrClosed; a second Close returns nil.
func TestClose(t *testing.T) {
	started := make(chan struct{})
	d := &fakeDialect{
		acquire: func(ctx context.Context) (int64, bool, sqldialect.Session, error) {
			close(started)
			<-ctx.Done() // a statement in flight
			return 0, false, sqldialect.Session{}, ctx.Err()
		},
	}
	l := newFake(t, d, nil)
	done := make(chan error, 1)
	go func() {
		_, err := l.TryLock(t.Context(), "k", time.Minute)
		done <- err
	}()
	<-started
	require.NoError(t, l.Close())
	requireOpError(t, <-done, "TryLock", "k", distlock.ErrClosed)
	require.Equal(t, "acquire,release", d.called(), "Close returned before the cleanup of the call it cancelled")
	require.NoError(t, l.Close(), "second Close")

	ctx := t.Context()
	lease := distlock.Lease{Key: "k", Token: "t", Fence: 1}
	_, err := l.TryLock(ctx, "k", time.Minute)
	requireOpError(t, err, "TryLock", "k", distlock.ErrClosed)
	_, err = l.Renew(ctx, lease, time.Minute)
	requireOpError(t, err, "Renew", "k", distlock.ErrClosed)
	requireOpError(t, l.Unlock(ctx, lease), "Unlock", "k", distlock.ErrClosed)
	_, err = l.Inspect(ctx, "k")
	requireOpError(t, err, "Inspect", "k", distlock.ErrClosed)
	_, err = l.Prune(ctx, 0)
	requireOpError(t, err, "Prune", "", distlock.ErrClosed)
	require.Equal(t, "acquire,release", d.called(), "a closed Locker ran statements")
}

// TestPruneBatches: Prune goes on from each batch's last key hash until a batch
// finds nothing, and adds up what the batches deleted; a negative olderThan is
// ErrInvalid.
func TestPruneBatches(t *testing.T) {
	var afters []string
	d := &fakeDialect{prune: func(after []byte) (int64, []byte, error) {
		afters = append(afters, string(after))
		switch string(after) {
		case sqldialect.HighWaterHash:
			return pruneBatch, []byte("a"), nil
		case "a":
			return 5, []byte("b"), nil
		}
		return 0, nil, nil
	}}
	l := newFake(t, d, nil)
	n, err := l.Prune(t.Context(), time.Hour)
	require.NoError(t, err)
	require.EqualValues(t, pruneBatch+5, n)
	require.Equal(t, []string{sqldialect.HighWaterHash, "a", "b"}, afters)
	_, err = l.Prune(t.Context(), -time.Second)
	requireOpError(t, err, "Prune", "", distlock.ErrInvalid)
	require.Len(t, afters, 3, "Prune with a negative olderThan ran a batch")
}

// TestNewLocker: a nil Dialect and invalid options are NewLocker's error.
func TestNewLocker(t *testing.T) {
	_, err := NewLocker("sqllock/fake", nil, nil)
	requireOpError(t, err, "New", "", distlock.ErrInvalid)
	_, err = NewLocker("sqllock/fake", &fakeDialect{}, &Options{CleanupTimeout: -1})
	requireOpError(t, err, "New", "", distlock.ErrInvalid)
	l := newFake(t, &fakeDialect{}, nil)
	require.Equal(t, DefaultTable, l.Table())
	require.Equal(t, driver.DefaultOwner(), l.Owner())
}
