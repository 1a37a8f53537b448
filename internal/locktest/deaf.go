// Package locktest holds Lockers for tests of code built on the contract (Hold,
// Do, election, gocronlock). It imports the root package only, so that a test that
// uses it links no backend.
package locktest

import (
	"context"
	"time"

	"github.com/distlock/distlock"
)

// A DeafRenew is a Locker whose Renew ignores its ctx: it returns only when the
// test closes Release, as a client that does not watch ctx while its server is
// silent, or a batch that waits for the latest deadline of its callers, would. The
// tests of Hold and of what is built on it (Do, election, gocronlock) use it to show
// that a Held's Context ends by its lease's Expires whatever Renew does.
type DeafRenew struct {
	distlock.Locker
	// Entered receives once each Renew has started.
	Entered chan struct{}
	// Release, closed by the test, lets every Renew return (with the inner
	// Locker's result).
	Release chan struct{}
}

// NewDeafRenew wraps l.
func NewDeafRenew(l distlock.Locker) *DeafRenew {
	return &DeafRenew{Locker: l, Entered: make(chan struct{}, 16), Release: make(chan struct{})}
}

func (d *DeafRenew) Renew(ctx context.Context, l distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	select {
	case d.Entered <- struct{}{}:
	default:
	}
	<-d.Release
	return d.Locker.Renew(context.WithoutCancel(ctx), l, ttl)
}
