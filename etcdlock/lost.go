package etcdlock

import (
	"context"
	"slices"

	"github.com/distlock/distlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// lostKey identifies one acquisition.
type lostKey struct {
	key   string
	fence uint64
}

// A lossEntry is what the Locker keeps for one acquisition that Lost or AfterLost
// asked about: the channel Lost returned, and the functions AfterLost registered,
// which run when the channel closes. One watch serves them all. l.mu guards it.
type lossEntry struct {
	ch  chan struct{}
	fns []*lossFunc
}

// A lossFunc is one AfterLost arrangement, kept until it runs or is stopped.
type lossFunc struct{ f func() }

// Lost returns a channel that is closed when the server shows that lease's
// acquisition has ended: its key was deleted (Unlock, or the lease expired or was
// revoked) or created anew. It watches the key, from the revision after the Fence,
// until then or until the client or the Locker is closed; calls for one
// acquisition share one watch. A renewal, which may move the key to another lease,
// keeps the channel open. Close closes every channel that Lost returned, and after
// Close Lost returns a closed channel: a closed Locker can neither renew a lease
// nor watch it. It returns nil for a Lease that etcdlock did not issue.
func (l *Locker) Lost(lease distlock.Lease) <-chan struct{} {
	if checkLease(lease) != nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shut {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return l.lossOf(lostKey{lease.Key, lease.Fence}).ch
}

// AfterLost runs f in its own goroutine once Lost(lease)'s channel closes (the
// acquisition ended, or Close was called), at once for a Lease that etcdlock did
// not issue or after Close, and soon (after the watch's first reply) for one that
// is not held. It shares Lost's watch of the acquisition, so it adds no goroutine
// of its own; stop reports whether it kept f from running.
func (l *Locker) AfterLost(lease distlock.Lease, f func()) (stop func() bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if checkLease(lease) != nil || l.shut {
		go f()
		return func() bool { return false }
	}
	lk := lostKey{lease.Key, lease.Fence}
	e := l.lossOf(lk)
	fn := &lossFunc{f: f}
	e.fns = append(e.fns, fn)
	return func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		i := slices.Index(e.fns, fn)
		if i < 0 {
			return false
		}
		e.fns = slices.Delete(e.fns, i, i+1)
		return true
	}
}

// lossOf returns the lossEntry of lk, and starts its watch when it has none. l.mu
// is held, and !l.shut.
func (l *Locker) lossOf(lk lostKey) *lossEntry {
	if e, ok := l.lost[lk]; ok {
		return e
	}
	e := &lossEntry{ch: make(chan struct{})}
	l.lost[lk] = e
	l.spawn(func() { l.watchLoss(lk, e) }) // l.mu held, !l.shut
	return e
}

// end closes the channel of e and starts its functions. l.mu is held.
func (e *lossEntry) end() {
	close(e.ch)
	for _, fn := range e.fns {
		go fn.f()
	}
	e.fns = nil
}

// watchLoss ends e once the acquisition lk ended, and forgets it; Close ends it
// instead when it comes first.
func (l *Locker) watchLoss(lk lostKey, e *lossEntry) {
	ended := l.awaitLoss(lk)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost[lk] != e {
		return // Close ended it
	}
	delete(l.lost, lk)
	if ended {
		e.end()
	}
}

// awaitLoss watches the key of lk and reports true once the acquisition ended, or
// false when it can no longer tell (the client or the Locker was closed).
func (l *Locker) awaitLoss(lk lostKey) bool {
	k := l.EtcdKey(lk.key)
	rev := int64(lk.fence) + 1
	for {
		ended, next, ok := l.watchFrom(k, lk.fence, rev)
		if !ok || ended {
			return ended
		}
		rev = next
	}
}

// watchFrom watches k from rev until the acquisition with create revision fence
// ended (ended), the watch's history was compacted (ok, and next is the revision to
// watch from), or the watch failed or the client or the Locker was closed (!ok).
func (l *Locker) watchFrom(k string, fence uint64, rev int64) (ended bool, next int64, ok bool) {
	ctx, cancel := l.background()
	defer cancel()
	for resp := range l.client.Watch(ctx, k, clientv3.WithRev(rev)) {
		if resp.CompactRevision != 0 {
			// History since rev is gone: read the key's state instead.
			gctx, gcancel := context.WithTimeout(ctx, l.o.RequestTimeout)
			get, err := l.client.Get(gctx, k)
			gcancel()
			if err != nil {
				return false, 0, false
			}
			if len(get.Kvs) == 0 || uint64(get.Kvs[0].CreateRevision) != fence {
				return true, 0, true
			}
			return false, get.Header.Revision + 1, true
		}
		if resp.Err() != nil {
			return false, 0, false
		}
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete || uint64(ev.Kv.CreateRevision) != fence {
				return true, 0, true
			}
		}
	}
	return false, 0, false // the client or the Locker was closed
}
