package zklock

import (
	"slices"

	"github.com/distlock/distlock"
)

// A lossFunc is one AfterLost arrangement, kept by the lease's subscription until
// it runs or is stopped.
type lossFunc struct{ f func() }

// AfterLost (distlock.LossWatcher) runs f in its own goroutine once Lost(lease)'s
// channel would close (see Lost: the lease was unlocked, its session ended, the
// connection was down for Options.DisconnectGrace, its Expires passed without a
// Renew, or the Locker was closed), or at once when lease is not held (lost
// already, or its Token is not one of this package's). The lease is watched as Lost
// watches it, with no goroutine per lease: the subscription keeps f, and the
// Locker's one monitor goroutine, or the call that ends the lease, starts it. stop
// ends the arrangement and reports whether it kept f from running; f runs at most
// once.
func (l *Locker) AfterLost(lease distlock.Lease, f func()) (stop func() bool) {
	if validLease(lease) {
		l.mu.Lock()
		if s := l.subscribeLocked(lease); s != nil {
			fn := &lossFunc{f: f}
			s.fns = append(s.fns, fn)
			l.mu.Unlock()
			return func() bool {
				l.mu.Lock()
				defer l.mu.Unlock()
				i := slices.Index(s.fns, fn)
				if i < 0 {
					return false
				}
				s.fns = slices.Delete(s.fns, i, i+1)
				return true
			}
		}
		l.mu.Unlock()
	}
	go f()
	return func() bool { return false }
}
