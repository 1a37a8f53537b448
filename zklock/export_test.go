package zklock

import (
	"time"

	"github.com/distlock/distlock"
)

// ReapWaiterID exposes reapWaiterID to the tests: it deletes the waiter nodes of
// keyPath with protected id.
func (l *Locker) ReapWaiterID(keyPath, id string) { l.reapWaiterID(keyPath, id) }

// WaitNodePrefix exposes waitNodePrefix: the path that an ephemeral-sequential create
// of waiter id under keyPath extends with its sequence number.
func WaitNodePrefix(keyPath, id string) string { return waitNodePrefix(keyPath, id) }

// RecordGrant makes s note a handshake that granted the session timeout d, as a
// reconnection to a server with other session timeout settings does.
func (s *Session) RecordGrant(d time.Duration) { s.record(d) }

// SetRenewHook makes f run in every Renew of l after the server confirmed the lease
// and before Renew settles its answer. Set it before l's first Renew.
func (l *Locker) SetRenewHook(f func(distlock.Lease)) { l.renewHook = f }

// BackgroundDone reports whether l's goroutines (calls' attempts, the loss monitor,
// background deletions) all ended within d.
func (l *Locker) BackgroundDone(d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		l.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// SetCheckEach makes l's Renews send their checks one per multi, each at once,
// instead of gathered into shared multis. Set it before l's first Renew.
func (l *Locker) SetCheckEach(on bool) { l.checks = newChecks(l, on) }
