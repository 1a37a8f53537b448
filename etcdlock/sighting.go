package etcdlock

import "time"

// A sighting is what a TryLock that found key held saw: the revision of its reply,
// at which the key existed, and the holder's etcd lease and ttl. A Wait whose
// watch of the key started at or before that revision needs no request to check
// that the key is held: the watch saw every deletion since.
type sighting struct {
	rev   int64     // the revision of the reply that showed the key held
	lease int64     // the holder's etcd lease ID (0: none)
	secs  int64     // the holder's ttl in whole seconds, from its value; 0: no lease
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
