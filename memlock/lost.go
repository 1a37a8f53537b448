package memlock

import (
	"slices"
	"time"

	"github.com/distlock/distlock"
)

// Lost returns a channel that is closed when lease is unlocked or revoked. (Expiry is
// not signalled: the holder knows Expires already.) It returns a closed channel when
// lease is not held now.
func (l *Locker) Lost(lease distlock.Lease) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.owned(lease, time.Now())
	if s == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return s.freed
}

// lossFunc is one AfterLost arrangement, kept by the key's state until it runs or
// is stopped.
type lossFunc struct{ f func() }

// AfterLost runs f in its own goroutine when lease is unlocked or revoked (when
// Lost's channel closes), or at once when lease is not held now; stop cancels it.
func (l *Locker) AfterLost(lease distlock.Lease, f func()) (stop func() bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.owned(lease, time.Now())
	if s == nil {
		go f()
		return func() bool { return false }
	}
	fn := &lossFunc{f: f}
	s.onLost = append(s.onLost, fn)
	return func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		i := slices.Index(s.onLost, fn)
		if i < 0 {
			return false
		}
		s.onLost = slices.Delete(s.onLost, i, i+1)
		return true
	}
}

// runLost starts the AfterLost functions of s and forgets them. l.mu must be held.
func (s *state) runLost() {
	for _, fn := range s.onLost {
		go fn.f()
	}
	s.onLost = nil
}
