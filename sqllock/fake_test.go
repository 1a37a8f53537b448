package sqllock

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/sqllock/sqldialect"
)

// fakeDialect is a Dialect without a database, for the tests of the Locker's own
// logic. Each method calls its hook when set (and records its name); otherwise it
// succeeds: Acquire wins with fence 1, Renew and Release find the row held.
type fakeDialect struct {
	acquire  func(ctx context.Context) (int64, bool, sqldialect.Session, error)
	renew    func(ctx context.Context) (bool, error)
	end      func() error
	prune    func(after []byte) (int64, []byte, error)
	retry    func(error) bool
	definite func(error) bool

	mu    sync.Mutex
	calls []string
}

func (d *fakeDialect) record(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, name)
}

// called returns the names of the methods called, in order.
func (d *fakeDialect) called() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.calls, ",")
}

func (d *fakeDialect) Acquire(ctx context.Context, _ sqldialect.Row, _ time.Duration) (int64, bool, sqldialect.Session, error) {
	d.record("acquire")
	if d.acquire != nil {
		return d.acquire(ctx)
	}
	return 1, true, sqldialect.Session{}, nil
}

func (d *fakeDialect) EndSession(context.Context, sqldialect.Session) error {
	d.record("end")
	if d.end != nil {
		return d.end()
	}
	return nil
}

func (d *fakeDialect) Renew(ctx context.Context, _ sqldialect.Row, _ time.Duration) (bool, error) {
	d.record("renew")
	if d.renew != nil {
		return d.renew(ctx)
	}
	return true, nil
}

func (d *fakeDialect) Release(context.Context, sqldialect.Row) (bool, error) {
	d.record("release")
	return true, nil
}

func (d *fakeDialect) Inspect(context.Context, sqldialect.Row) (sqldialect.RowState, bool, error) {
	d.record("inspect")
	return sqldialect.RowState{}, false, nil
}

func (d *fakeDialect) Prune(_ context.Context, after []byte, _ time.Duration, _ int) (int64, []byte, error) {
	d.record("prune")
	if d.prune != nil {
		return d.prune(after)
	}
	return 0, nil, nil
}

func (d *fakeDialect) Retryable(err error) bool { return d.retry != nil && d.retry(err) }
func (d *fakeDialect) Definite(err error) bool  { return d.definite != nil && d.definite(err) }

// newFake returns a Locker on d with opts, closed when the test ends.
func newFake(t testing.TB, d sqldialect.Dialect, opts *Options) *Locker {
	l, err := NewLocker("sqllock/fake", d, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
