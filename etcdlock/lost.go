package etcdlock

import (
	"context"

	"github.com/distlock/distlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// lostKey identifies one acquisition.
type lostKey struct {
	key   string
	fence uint64
}

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
	lk := lostKey{lease.Key, lease.Fence}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shut {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if ch, ok := l.lost[lk]; ok {
		return ch
	}
	ch := make(chan struct{})
	l.lost[lk] = ch
	l.spawn(func() { l.watchLoss(lk, ch) }) // l.mu held, !l.shut
	return ch
}

// watchLoss closes ch once the acquisition lk ended, and forgets it; Close closes
// it instead when it comes first.
func (l *Locker) watchLoss(lk lostKey, ch chan struct{}) {
	ended := l.awaitLoss(lk)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost[lk] != ch {
		return // Close closed it
	}
	delete(l.lost, lk)
	if ended {
		close(ch)
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
