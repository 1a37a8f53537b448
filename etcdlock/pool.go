package etcdlock

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A leaseInfo is what a Locker knows of one of the etcd leases it granted.
type leaseInfo struct {
	id   clientv3.LeaseID
	secs int64         // the TTL asked for, whole seconds
	ttl  time.Duration // the TTL granted (the server may raise it to its minimum)
	at   time.Time     // taken before the request that last set its TTL (grant or refresh)
	// unsure: a request that put a key on the lease had an attempt whose outcome is
	// unknown; that attempt may still take effect (a proposal applied late) and
	// create a key on the lease, so the lease is never kept as a spare.
	unsure bool
	// token is the token of the acquisition whose key it holds, while it holds
	// one (held): the key's value starts with it, and records secs. It is the
	// Lease's Token (the same string, not a copy).
	token string
	// rev is the revision of the put that put that key on the lease (TryLock's
	// create, or Renew's move), while it holds one; 0 when unknown. While the
	// key's mod revision is rev, the key is that put's: the acquisition's (its
	// create revision is the Fence) on this lease.
	rev int64
}

// expiry is the earliest time the server may expire the lease.
func (i leaseInfo) expiry() time.Time { return i.at.Add(i.ttl) }

// A leasePool holds the Locker's spare leases, which hold no key, by their TTL in
// whole seconds, and what it knows of the leases of its acquisitions. l.mu guards
// it.
//
// Unlock deletes the key and keeps its lease as a spare; a TryLock that finds the
// key held keeps its lease too. TryLock takes a spare of its whole seconds instead
// of granting one: a round trip less, so that a TryLock+Unlock pair costs two round
// trips (Txn, Txn), as a concurrency.Mutex on a Session does.
type leasePool struct {
	spares map[int64][]leaseInfo // by secs, the freshest last
	n      int                   // spares in all
	// held are the leases of this Locker's acquisitions, by key and fence, which
	// Renew refreshes and Unlock makes spares; entries of leases that expired
	// unreleased are pruned when the map has doubled.
	held    map[lostKey]leaseInfo
	pruneAt int
}

// maxSpares bounds the spare leases of a Locker; a spare beyond it is revoked.
const maxSpares = 64

// maxEmptyLists bounds the TTLs whose list of spares takeSpare keeps when empty.
const maxEmptyLists = 8

// spareSlack is how much of ttl a Lease may lose, beyond what the rounding up to
// whole seconds leaves, when TryLock takes a spare as it is: the Lease's Expires is
// the spare's expiry when that comes before the call's start plus ttl. An older
// spare is refreshed first (KeepAliveOnce).
func spareSlack(ttl time.Duration) time.Duration { return min(ttl/10, time.Second) }

// takeSpare returns a spare lease of secs, the freshest one, and whether it needs a
// refresh before a TryLock of ttl that started at start may use it. Spares that
// have expired are dropped (they hold nothing, and the server deletes them).
func (l *Locker) takeSpare(secs int64, ttl time.Duration, start time.Time) (sp leaseInfo, stale, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := &l.pool
	list := p.spares[secs]
	for len(list) > 0 {
		sp = list[len(list)-1]
		list = list[:len(list)-1]
		p.n--
		if sp.expiry().After(start) {
			ok = true
			break
		}
	}
	// An empty list stays (up to a few), so that the next putSpare of secs does
	// not allocate one.
	if len(list) == 0 && len(p.spares) > maxEmptyLists {
		delete(p.spares, secs)
	} else {
		p.spares[secs] = list
	}
	if !ok {
		return leaseInfo{}, false, false
	}
	return sp, sp.expiry().Before(start.Add(ttl - spareSlack(ttl))), true
}

// putSpare keeps sp, which holds no key, as a spare lease; when the pool is full,
// after Close, or when sp is unsure, it revokes sp in the background instead. It
// must be called during a call.
func (l *Locker) putSpare(sp leaseInfo) {
	now := time.Now()
	l.mu.Lock()
	keep := l.keepSpare(sp, now)
	l.mu.Unlock()
	if !keep {
		l.revokeLater(sp.id)
	}
}

// keepSpare adds sp to the pool and reports true, or reports false when the pool
// is full, after Close, or when sp is unsure or expired. l.mu is held.
func (l *Locker) keepSpare(sp leaseInfo, now time.Time) bool {
	p := &l.pool
	if p.n >= maxSpares {
		p.dropExpired(now)
	}
	if l.shut || sp.unsure || p.n >= maxSpares || !now.Before(sp.expiry()) {
		return false
	}
	p.spares[sp.secs] = append(p.spares[sp.secs], sp)
	p.n++
	return true
}

// released records that this Locker's Unlock deleted the key (etcd key k) of the
// acquisition lk, recorded with the lease h, which holds no key now: it forgets
// the acquisition, ends what Lost and AfterLost wait for, and keeps h as a spare
// (see putSpare), under one lock. It must be called during a call.
func (l *Locker) released(lk lostKey, k string, h leaseInfo) {
	now := time.Now()
	l.mu.Lock()
	delete(l.pool.held, lk)
	l.endLossLocked(k, lk.fence)
	keep := l.keepSpare(h, now)
	l.mu.Unlock()
	if !keep {
		l.revokeLater(h.id)
	}
}

// dropExpired drops the spares that expired by now (they hold nothing, and the
// server deletes them). l.mu is held.
func (p *leasePool) dropExpired(now time.Time) {
	for secs, list := range p.spares {
		live := list[:0]
		for _, sp := range list {
			if now.Before(sp.expiry()) {
				live = append(live, sp)
			}
		}
		p.n -= len(list) - len(live)
		if len(live) == 0 {
			delete(p.spares, secs)
		} else {
			p.spares[secs] = live
		}
	}
}

// hold records that the acquisition lk put its key on the lease i.
func (l *Locker) hold(lk lostKey, i leaseInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := &l.pool
	if len(p.held) >= p.pruneAt {
		now := time.Now()
		for k, h := range p.held {
			if h.expiry().Before(now) {
				delete(p.held, k)
			}
		}
		p.pruneAt = max(2*len(p.held), 256)
	}
	p.held[lk] = i
}

// refreshed records that the lease id of the acquisition lk, if this Locker
// recorded it, was refreshed to ttl by a request sent at at.
func (l *Locker) refreshed(lk lostKey, id clientv3.LeaseID, ttl time.Duration, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, ok := l.pool.held[lk]; ok && h.id == id && at.Add(ttl).After(h.expiry()) {
		h.at, h.ttl = at, ttl
		l.pool.held[lk] = h
	}
}

// heldOf returns what the Locker recorded of the acquisition lk's lease.
func (l *Locker) heldOf(lk lostKey) (leaseInfo, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.pool.held[lk]
	return h, ok
}

// forget drops what the Locker recorded of the acquisition lk's lease.
func (l *Locker) forget(lk lostKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pool.held, lk)
}

// dropSpares empties the pool and returns the spares, for Close to revoke.
func (l *Locker) dropSpares() []clientv3.LeaseID {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []clientv3.LeaseID
	for _, list := range l.pool.spares {
		for _, sp := range list {
			ids = append(ids, sp.id)
		}
	}
	l.pool.spares, l.pool.n = map[int64][]leaseInfo{}, 0
	return ids
}

// revokeSpares revokes ids, a few at a time, until ctx ends.
func (l *Locker) revokeSpares(ctx context.Context, ids []clientv3.LeaseID) {
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			l.revokeNow(ctx, id)
		})
	}
	wg.Wait()
}
