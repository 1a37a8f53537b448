package zklock

import (
	"fmt"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// leaseNode returns the path of lease's node (the core validated lease). A Token
// that this package did not make names no lock: ErrNotHeld.
func (l *Locker) leaseNode(lease distlock.Lease) (string, error) {
	h, ok := parseToken(lease.Token)
	if !ok {
		return "", fmt.Errorf("the Lease's Token is not one of a zklock lock node: %w", distlock.ErrNotHeld)
	}
	return h.nodePath(l.keyPath(lease.Key)), nil
}

// validLease reports whether lease can be one of this package's (for Lost and
// AfterLost, which the core does not see).
func validLease(lease distlock.Lease) bool {
	_, ok := parseToken(lease.Token)
	return ok && driver.ValidateLease(lease) == nil && driver.ValidateKey(lease.Key, MaxKeyLen) == nil
}

// errDead is the cause of a call on a lease whose node the Locker is deleting.
var errDead = fmt.Errorf("the lease was reported lost, or its Unlock's outcome was unknown, and its node is being removed: %w", distlock.ErrNotHeld)

// checkDead returns an error wrapping ErrNotHeld when the Locker is deleting the
// lease's node (see loseLocked, unlockUnknown).
func (l *Locker) checkDead(token string) error {
	l.mu.Lock()
	_, dead := l.dead[token]
	l.mu.Unlock()
	if dead {
		return errDead
	}
	return nil
}

// notHeld forgets a lease that was released, or found not held.
func (l *Locker) notHeld(token string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.subs[token]; s != nil {
		s.fire()
		delete(l.subs, token)
	}
	delete(l.held, token)
	l.failRenewsLocked(token)
}

// A renewFlight is the Renews of one lease that wait for the server's answer. A
// lease that the Locker lets go meanwhile (reported lost, found not held, released,
// or its node being deleted) marks its flight gone, and none of those Renews then
// returns a new Expires: the Locker may delete the node once the old one passes.
// Renew settles its answer under l.mu (commitRenew), so a loss comes either before
// that, and the Renew fails, or after, and counts with the renewed Expires.
type renewFlight struct {
	n    int  // the Renews in the flight
	gone bool // the lease was let go while they waited
}

// beginRenew enters a Renew of the lease with token into its flight, or returns why
// it cannot be renewed: the Locker is deleting the lease's node.
func (l *Locker) beginRenew(token string) (*renewFlight, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, dead := l.dead[token]; dead {
		return nil, errDead
	}
	f := l.flights[token]
	if f == nil {
		f = &renewFlight{}
		l.flights[token] = f
	}
	f.n++
	return f, nil
}

// endRenew takes a Renew that failed out of its flight.
func (l *Locker) endRenew(token string, f *renewFlight) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endRenewLocked(token, f)
}

func (l *Locker) endRenewLocked(token string, f *renewFlight) {
	f.n--
	if f.n == 0 && l.flights[token] == f {
		delete(l.flights, token)
	}
}

// failRenewsLocked makes the Renews in flight of the lease with token fail: the
// Locker no longer holds the lease as live. l.mu is held.
func (l *Locker) failRenewsLocked(token string) {
	if f := l.flights[token]; f != nil {
		f.gone = true
		delete(l.flights, token)
	}
}
