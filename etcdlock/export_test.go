package etcdlock

import "time"

// Watches returns the number of keys the Locker watches for its Waits, and how many
// Waits use the watch of key.
func (l *Locker) Watches(key string) (keys, refs int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if kw := l.watches[key]; kw != nil {
		refs = kw.refs
	}
	return len(l.watches), refs
}

// SetWatchIdle sets how long a key's watch stays after its last Wait. Call it before
// the first Wait.
func (l *Locker) SetWatchIdle(d time.Duration) { l.watchIdle = d }

// WatchStarted reports whether the Locker's watch of key has started.
func (l *Locker) WatchStarted(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	kw := l.watches[key]
	return kw != nil && kw.created != 0
}

// Waiting returns the number of Waits of key in the Locker's line that are not
// woken yet.
func (l *Locker) Waiting(key string) int { return l.waiters.Len(key) }

// EtcdKey returns the etcd key that holds key's lock.
func (l *Locker) EtcdKey(key string) string { return l.etcdKey(key) }

// ChaseCounts returns how many LeaseTimeToLive probes the Locker's chases sent and
// how many expired leases they revoked.
func (l *Locker) ChaseCounts() (probes, revokes int64) {
	return l.chaseProbes.Load(), l.chaseRevokes.Load()
}
