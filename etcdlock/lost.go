package etcdlock

import (
	"slices"

	"github.com/distlock/distlock"
)

// lostKey identifies one acquisition.
type lostKey struct {
	key   string
	fence uint64
}

// A lossEntry is what the Locker keeps for one acquisition that Lost or AfterLost
// asked about: the channel Lost returned, and the functions AfterLost registered,
// which run when the acquisition ends. The Locker's shared watch of its prefix
// (losswatch.go) ends the entries. l.mu guards it.
type lossEntry struct {
	key    string        // the etcd key
	fence  uint64        // the acquisition's create revision
	ch     chan struct{} // what Lost returned; nil until Lost is called
	fns    []*lossFunc
	next   *lossEntry // the entry of another acquisition of the same key
	queued bool       // in the watch's checks (losswatch.go)
	gone   bool       // ended, or dropped
}

// A lossFunc is one AfterLost arrangement, kept until it runs or is stopped.
type lossFunc struct{ f func() }

// Lost returns a channel that is closed when the server shows that lease's
// acquisition has ended: its key was deleted (Unlock, or the lease expired or was
// revoked) or created anew, at a revision after the Fence. One watch of the
// Locker's prefix, shared by every acquisition that Lost or AfterLost asked about,
// tells, until then or until the client or the Locker is closed; an acquisition
// registered after the watch went past its Fence is checked by one read of its
// key (batched with others), as is every acquisition when the watch must start
// anew (its history was compacted, or the server cancelled it). A renewal, which
// may move the key to another lease, keeps the channel open. Close closes every
// channel that Lost returned, and after Close Lost returns a closed channel: a
// closed Locker can neither renew a lease nor watch it. It returns nil for a
// Lease that etcdlock did not issue.
func (l *Locker) Lost(lease distlock.Lease) <-chan struct{} {
	if checkLease(lease) != nil {
		return nil
	}
	k := l.etcdKey(lease.Key)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shut {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	e := l.lossOf(k, lease.Fence)
	if e.ch == nil {
		e.ch = make(chan struct{})
	}
	return e.ch
}

// AfterLost runs f in its own goroutine once Lost(lease)'s channel closes (the
// acquisition ended, or Close was called), at once for a Lease that etcdlock did
// not issue or after Close, and soon (after a read of its key) for one that is not
// held. It shares the Locker's watch, so it adds no goroutine of its own; stop
// reports whether it kept f from running.
func (l *Locker) AfterLost(lease distlock.Lease, f func()) (stop func() bool) {
	if checkLease(lease) != nil {
		go f()
		return func() bool { return false }
	}
	k := l.etcdKey(lease.Key)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shut {
		go f()
		return func() bool { return false }
	}
	e := l.lossOf(k, lease.Fence)
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
		if len(e.fns) == 0 && e.ch == nil && !e.gone {
			l.unlinkLoss(e) // nothing waits for it
		}
		return true
	}
}

// lossOf returns the lossEntry of the acquisition (k, fence), and registers one
// with the Locker's watch when it has none. l.mu is held, and !l.shut.
func (l *Locker) lossOf(k string, fence uint64) *lossEntry {
	head := l.lost[k]
	for e := head; e != nil; e = e.next {
		if e.fence == fence {
			return e
		}
	}
	e := &lossEntry{key: k, fence: fence, next: head}
	l.lost[k] = e
	l.watchLosses(e)
	return e
}

// endLoss ends the acquisition (k, fence), if the Locker has an entry for it:
// this Locker's Unlock saw it end.
func (l *Locker) endLoss(k string, fence uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endLossLocked(k, fence)
}

// endLossLocked is endLoss with l.mu held.
func (l *Locker) endLossLocked(k string, fence uint64) {
	for e := l.lost[k]; e != nil; e = e.next {
		if e.fence == fence {
			l.unlinkLoss(e)
			e.end()
			return
		}
	}
}

// unlinkLoss removes e from l.lost, and leaves the watch idle when no entry is
// left. l.mu is held.
func (l *Locker) unlinkLoss(e *lossEntry) {
	e.gone = true
	head := l.lost[e.key]
	switch {
	case head == e && e.next == nil:
		delete(l.lost, e.key)
	case head == e:
		l.lost[e.key] = e.next
	default:
		for p := head; p != nil; p = p.next {
			if p.next == e {
				p.next = e.next
				break
			}
		}
	}
	if len(l.lost) == 0 {
		l.idleLosses()
	}
}

// end closes the channel of e and starts its functions. l.mu is held.
func (e *lossEntry) end() {
	if e.ch != nil {
		close(e.ch)
	}
	for _, fn := range e.fns {
		go fn.f()
	}
	e.fns = nil
}

// endLosses ends every entry, for Close. l.mu is held.
func (l *Locker) endLosses() {
	for k, head := range l.lost {
		for e := head; e != nil; e = e.next {
			e.gone = true
			e.end()
		}
		delete(l.lost, k)
	}
	if lw := l.lossW; lw != nil {
		if lw.idle != nil {
			lw.idle.Stop()
		}
		l.lossW = nil // Close's cancel ends its goroutine
	}
}
