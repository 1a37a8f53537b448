package zklock

import (
	"fmt"

	"github.com/distlock/distlock"
)

// leaseNode validates lease and returns its handle and node path. A Token that this
// package did not make names no lock: ErrNotHeld. Errors are *distlock.OpError.
func (l *Locker) leaseNode(op string, lease distlock.Lease) (handle, string, error) {
	if err := distlock.ValidateLease(lease); err != nil {
		return handle{}, "", opError(op, lease.Key, err)
	}
	if err := distlock.ValidateKey(lease.Key, MaxKeyLen); err != nil {
		return handle{}, "", opError(op, lease.Key, fmt.Errorf("Lease: %w", err))
	}
	h, ok := parseToken(lease.Token)
	if !ok {
		return handle{}, "", opError(op, lease.Key, fmt.Errorf("the Lease's Token is not one of a zklock lock node: %w", distlock.ErrNotHeld))
	}
	return h, h.nodePath(l.keyPath(lease.Key)), nil
}

// checkDead returns an error wrapping ErrNotHeld when the lease was reported lost.
func (l *Locker) checkDead(token string) error {
	l.mu.Lock()
	_, dead := l.dead[token]
	l.mu.Unlock()
	if dead {
		return fmt.Errorf("the lease was reported lost and its node is being removed: %w", distlock.ErrNotHeld)
	}
	return nil
}

// notHeld forgets a lease that was released, or found not held.
func (l *Locker) notHeld(token string) {
	l.dropSub(token)
	l.dropHeld(token)
}
