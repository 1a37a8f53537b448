package zklock

// unlockUnknown lets go of a lease whose Unlock's outcome is unknown, and deletes
// its node in the background: Lost closes, and Renew and Unlock of the lease (also
// those in flight) say ErrNotHeld until the node is gone, as for a lease reported
// lost.
func (l *Locker) unlockUnknown(token, node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.subs[token]; s != nil {
		s.fire()
		delete(l.subs, token)
	}
	l.failRenewsLocked(token)
	l.dead[token] = struct{}{}
	l.bg(func() {
		l.reapNode(node, 0)
		l.mu.Lock()
		delete(l.dead, token)
		delete(l.held, token)
		l.mu.Unlock()
	})
}
