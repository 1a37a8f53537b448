package sqllock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/faultproxy"
)

// abandonCase makes a Locker that reaches its database through addr, and one that
// reaches it directly, on the same table.
type abandonCase struct {
	name             string
	server           func() string
	viaProxy, direct func(t *testing.T, addr string) *Locker
}

func abandonCases() []abandonCase {
	pg := func(t *testing.T, addr string) *Locker {
		l, err := NewPostgres(opCtx(t), pgPool(t, addr), &Options{Table: "abandon"})
		if err != nil {
			t.Fatalf("NewPostgres: %v", err)
		}
		t.Cleanup(l.waitCleanups)
		return l.Locker
	}
	my := func(t *testing.T, addr string) *Locker {
		l, err := NewMySQL(opCtx(t), myDB(t, addr, nil), &Options{Table: "abandon"})
		if err != nil {
			t.Fatalf("NewMySQL: %v", err)
		}
		t.Cleanup(l.waitCleanups)
		return l
	}
	return []abandonCase{
		{name: "postgres", server: func() string { return pgSrv.Addr() }, viaProxy: pg, direct: pg},
		{name: "mariadb", server: func() string { return mySrv.Addr() }, viaProxy: my, direct: my},
	}
}

// TestAbandonedAcquire: an acquire statement that is held up on its connection past
// the caller's deadline, and reaches the database only after TryLock returned, the
// driver closed the connection and the Locker's cleanup ended, does not lock the
// key (contract rule 5): the Locker ends the statement's database session before
// its cleanup, so the late bytes are never executed.
func TestAbandonedAcquire(t *testing.T) {
	for _, tc := range abandonCases() {
		t.Run(tc.name, func(t *testing.T) {
			hp, err := faultproxy.NewHoldProxy(tc.server(), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = hp.Close() })
			a := tc.viaProxy(t, hp.Addr())
			b := tc.direct(t, "")
			key := "abandon-" + distlock.NewToken()

			// Warm up the connection (prepared statements, session identity), so
			// that the held bytes are the acquiring statement itself.
			lease, err := a.TryLock(opCtx(t), key, time.Minute)
			if err != nil {
				t.Fatalf("warm-up TryLock: %v", err)
			}
			if err := a.Unlock(opCtx(t), lease); err != nil {
				t.Fatalf("warm-up Unlock: %v", err)
			}

			h := hp.HoldNext()
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			_, err = a.TryLock(ctx, key, time.Minute)
			cancel()
			if err == nil || errors.Is(err, distlock.ErrLocked) {
				t.Fatalf("TryLock whose statement is held: %v, want a transport error", err)
			}
			select {
			case <-h.Held():
			default:
				t.Fatal("the proxy held nothing: TryLock sent no statement")
			}
			a.waitCleanups() // the cleanup has ended (bounded by cleanupTimeout)

			h.Release()
			select {
			case <-h.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the held connection did not end within 10s of Release")
			}
			// The database has read everything the connection sent (or discarded
			// it with the session): the key must be free.
			lb, err := b.TryLock(opCtx(t), key, time.Minute)
			if err != nil {
				hd, ierr := b.Inspect(opCtx(t), key)
				t.Fatalf("TryLock after the abandoned statement arrived: %v (holder %+v, %v); the late statement locked the key", err, hd, ierr)
			}
			if err := b.Unlock(opCtx(t), lb); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// sessDialect records the calls of Locker.cleanup; endSession answers from ends,
// then nil.
type sessDialect struct {
	dialect
	mu    sync.Mutex
	calls []string
	ends  []error
}

func (d *sessDialect) endSession(context.Context, session) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, "end")
	if len(d.ends) == 0 {
		return nil
	}
	err := d.ends[0]
	if len(d.ends) > 1 {
		d.ends = d.ends[1:]
	}
	return err
}

func (d *sessDialect) release(context.Context, []byte, []byte, []byte) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, "release")
	return false, nil
}

func (d *sessDialect) retryable(error) bool { return false }

func (d *sessDialect) called() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.calls, ",")
}

// TestCleanupEndsSessionFirst: the cleanup of an acquire whose outcome is unknown
// waits until the statement's session has ended (retrying while it is still there
// or the database cannot be reached), then releases; it releases at once when the
// session has no name, and still releases when the database refuses to end it.
func TestCleanupEndsSessionFirst(t *testing.T) {
	transport := errors.New("connection reset")
	refused := fmt.Errorf("%w 42: permission denied", errCannotEnd)
	for _, tc := range []struct {
		name string
		sess session
		ends []error
		want string
	}{
		{"ends", session{id: 42}, nil, "end,release"},
		{"retries until gone", session{id: 42}, []error{errSessionLive, transport, errSessionLive, nil}, "end,end,end,end,release"},
		{"refused", session{id: 42}, []error{refused}, "end,release"},
		{"unnamed", session{}, nil, "release"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &sessDialect{ends: tc.ends}
			l := &Locker{d: d}
			l.cleanup(t.Context(), nil, nil, nil, tc.sess)
			if got := d.called(); got != tc.want {
				t.Fatalf("calls %q, want %q", got, tc.want)
			}
		})
	}
}

// TestEndSessionGivesUp: a session that never ends is waited for until the
// context ends, not longer.
func TestEndSessionGivesUp(t *testing.T) {
	d := &sessDialect{ends: []error{errSessionLive}}
	l := &Locker{d: d}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := l.endSession(ctx, session{id: 42})
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("endSession took %v with a 200ms context", took)
	}
	if !errors.Is(err, errSessionLive) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("endSession of a session that stays: %v, want errSessionLive joined with the deadline", err)
	}
	if n := strings.Count(d.called(), "end"); n < 3 {
		t.Fatalf("endSession looked %d times in 200ms", n)
	}
}
