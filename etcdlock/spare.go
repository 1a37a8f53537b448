package etcdlock

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A spare is the lease of a TryLock that found the key held. It holds no key, so
// the Locker's next TryLock with the same whole seconds uses it instead of granting
// a lease (a round trip less on each attempt of a wait loop: Lock tries, waits,
// tries again), as long as it is young (spareMaxAge). A Locker keeps one; one it
// does not use holds nothing and expires on the server by its TTL.
type spare struct {
	id      clientv3.LeaseID // 0: none
	secs    int64            // the TTL asked for
	granted time.Duration    // the TTL granted (the server may raise it to its minimum)
	at      time.Time        // taken before the LeaseGrant request was sent
}

// spareMaxAge is the oldest spare lease that a TryLock for ttl uses: the lease's
// Expires counts from the grant (see TryLock), so the age is what the Lease may
// lose of ttl, beyond what the rounding up to whole seconds leaves: a tenth of ttl,
// at most a second.
func spareMaxAge(ttl time.Duration) time.Duration { return min(ttl/10, time.Second) }

// takeSpare returns the spare lease if it fits a TryLock of secs and ttl that
// started at start; it revokes, in the background, one that no TryLock could use
// any longer.
func (l *Locker) takeSpare(secs int64, ttl time.Duration, start time.Time) (spare, bool) {
	l.mu.Lock()
	sp := l.spare
	if sp.id == 0 {
		l.mu.Unlock()
		return spare{}, false
	}
	age := start.Sub(sp.at)
	if sp.secs == secs && age <= spareMaxAge(ttl) {
		l.spare = spare{}
		l.mu.Unlock()
		return sp, true
	}
	stale := age > time.Second // too old for any ttl
	if stale {
		l.spare = spare{}
	}
	l.mu.Unlock()
	if stale {
		l.revokeLater(sp.id)
	}
	return spare{}, false
}

// putSpare keeps sp as the spare lease, revoking the one it replaces in the
// background; after Close it revokes sp instead. It must be called during a call.
func (l *Locker) putSpare(sp spare) {
	l.mu.Lock()
	drop := sp
	if !l.shut {
		drop, l.spare = l.spare, sp
	}
	l.mu.Unlock()
	if drop.id != 0 {
		l.revokeLater(drop.id)
	}
}

// A sighting is what a TryLock that found key held saw: the revision of its reply,
// at which the key existed, and the holder's lease. A Wait whose watch of the key
// started at or before that revision needs no request to check that the key is
// held: the watch saw every deletion since.
type sighting struct {
	rev   int64     // the revision of the reply that showed the key held
	lease int64     // the holder's etcd lease ID (0: none)
	secs  int64     // the holder's ttl in whole seconds, from its value
	at    time.Time // taken before the request that saw it was sent
}

// Bounds of the sightings a Locker keeps.
const (
	// sightingMaxAge is how long a sighting serves Wait: its time bounds the wait
	// for the holder's ttl, which an old sighting would make needlessly short.
	sightingMaxAge = 2 * time.Second
	// maxSightings bounds the map: beyond it, old sightings are dropped.
	maxSightings = 1024
)

// see records that key was seen held at rev by a request sent at at.
func (l *Locker) see(key string, s sighting) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.sighting) >= maxSightings {
		for k, old := range l.sighting {
			if s.at.Sub(old.at) > sightingMaxAge || len(l.sighting) >= maxSightings {
				delete(l.sighting, k)
			}
		}
	}
	l.sighting[key] = s
}

// sightingOf returns a recent sighting of key, if there is one.
func (l *Locker) sightingOf(key string) (sighting, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.sighting[key]
	if ok && time.Since(s.at) > sightingMaxAge {
		delete(l.sighting, key)
		return sighting{}, false
	}
	return s, ok
}
