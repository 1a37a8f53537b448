// Package waitq wakes the waiters of one Locker on one key one at a time, so that a
// herd of waiters does not send a TryLock each per release.
//
// A backend's Wait joins the key's line and returns when its Waiter is woken. The
// backend reports what it sees: Released when a release of the key arrives (a
// pub/sub message, a watch event, a notification), Attempt at the start of every
// TryLock of the key, AttemptFailed when that TryLock failed for a reason other than
// the key being held. A release wakes the first waiter only; the next one is woken
// when no TryLock of the key starts within the handoff time after it (the woken
// caller gave up), or at once when the attempt failed. A TryLock that finds the key
// held, or takes it, ends the handoff: the others sleep until the next release.
//
// Across Lockers nothing is shared: each Locker that has waiters sends one TryLock per
// release, so a release costs as many requests as there are Lockers with waiters on
// the key, not as many as there are waiters.
package waitq

import (
	"container/list"
	"sync"
	"time"
)

// DefaultHandoff is the handoff time of New(0).
const DefaultHandoff = 20 * time.Millisecond

// A Queue holds the lines of waiters of one Locker, by key. It is safe for
// concurrent use. The zero value is not usable; call New.
type Queue struct {
	handoff time.Duration

	mu     sync.Mutex
	lines  map[string]*line
	closed bool
}

// A line is the waiters of one key, first come first woken.
type line struct {
	waiters list.List   // of *Waiter, not yet woken
	timer   *time.Timer // the pending handoff's timer; nil when none is pending
	pending bool        // a woken waiter's TryLock has not started yet
	gen     uint64      // counts the handoffs, so that a stale timer does nothing
}

// A Waiter is one Wait's place in its key's line.
type Waiter struct {
	q     *Queue
	key   string
	elem  *list.Element // nil once woken or gone
	woken chan struct{}
}

// New returns a Queue whose woken waiters have handoff to start their TryLock
// before the next one is woken; 0 means DefaultHandoff.
func New(handoff time.Duration) *Queue {
	if handoff <= 0 {
		handoff = DefaultHandoff
	}
	return &Queue{handoff: handoff, lines: make(map[string]*line)}
}

// Join puts a new Waiter at the end of key's line. After Close it returns a Waiter
// that is woken already. The caller must call Leave when its Wait returns.
func (q *Queue) Join(key string) *Waiter {
	w := &Waiter{q: q, key: key, woken: make(chan struct{})}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		close(w.woken)
		return w
	}
	ln := q.lines[key]
	if ln == nil {
		ln = &line{}
		q.lines[key] = ln
	}
	w.elem = ln.waiters.PushBack(w)
	return w
}

// Woken returns a channel that is closed when the Waiter is woken: the key may be
// free, and it is this waiter's turn to try it.
func (w *Waiter) Woken() <-chan struct{} { return w.woken }

// Leave takes the Waiter out of its line if it is still in it. It must be called
// once the Wait returns, woken or not; it is idempotent.
func (w *Waiter) Leave() {
	q := w.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if w.elem == nil {
		return
	}
	ln := q.lines[w.key]
	ln.waiters.Remove(w.elem)
	w.elem = nil
	q.drop(w.key, ln)
}

// Released reports that a release of key was seen: it wakes the first waiter of
// key, and starts the handoff. Without waiters it does nothing.
func (q *Queue) Released(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if ln := q.lines[key]; ln != nil {
		q.wakeNext(key, ln)
	}
}

// Attempt reports that a TryLock of key starts: it ends the handoff, if one is
// pending (the woken waiter, or another caller, is trying the key).
func (q *Queue) Attempt(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if ln := q.lines[key]; ln != nil && ln.pending {
		ln.pending = false
		ln.timer.Stop()
		q.drop(key, ln)
	}
}

// AttemptFailed reports that a TryLock of key failed for a reason other than the key
// being held (a transport error, a context that ended): nobody may be about to take
// the key, so it wakes the next waiter.
func (q *Queue) AttemptFailed(key string) { q.Released(key) }

// WakeAll wakes every waiter of key, for events after which each must check for
// itself (the backend's subscription broke and it may have missed releases).
func (q *Queue) WakeAll(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ln := q.lines[key]
	if ln == nil {
		return
	}
	for ln.waiters.Len() > 0 {
		q.wake(ln)
	}
	ln.pending = false
	if ln.timer != nil {
		ln.timer.Stop()
	}
	q.drop(key, ln)
}

// Close wakes every waiter of every key and stops the handoff timers; Join after
// Close returns a woken Waiter. The backend's Wait then sees that its Locker is
// closed.
func (q *Queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for key, ln := range q.lines {
		for ln.waiters.Len() > 0 {
			q.wake(ln)
		}
		if ln.timer != nil {
			ln.timer.Stop()
		}
		delete(q.lines, key)
	}
}

// Len returns the number of waiters of key that are not woken yet.
func (q *Queue) Len(key string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if ln := q.lines[key]; ln != nil {
		return ln.waiters.Len()
	}
	return 0
}

// wakeNext wakes the first waiter of ln and (re)starts the handoff timer. q.mu is
// held.
func (q *Queue) wakeNext(key string, ln *line) {
	if ln.waiters.Len() == 0 {
		ln.pending = false
		if ln.timer != nil {
			ln.timer.Stop()
		}
		q.drop(key, ln)
		return
	}
	q.wake(ln)
	ln.pending = true
	if ln.timer != nil {
		ln.timer.Stop()
	}
	ln.gen++
	gen := ln.gen
	ln.timer = time.AfterFunc(q.handoff, func() { q.handoffExpired(key, ln, gen) })
}

// handoffExpired runs when the woken waiter of handoff gen did not start its
// TryLock in time.
func (q *Queue) handoffExpired(key string, ln *line, gen uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.lines[key] != ln || !ln.pending || ln.gen != gen {
		return // that handoff ended meanwhile, or a newer one started
	}
	q.wakeNext(key, ln)
}

// wake wakes the first waiter of ln. q.mu is held and ln has waiters.
func (q *Queue) wake(ln *line) {
	w := ln.waiters.Remove(ln.waiters.Front()).(*Waiter)
	w.elem = nil
	close(w.woken)
}

// drop forgets ln when it has neither waiters nor a pending handoff. q.mu is held.
func (q *Queue) drop(key string, ln *line) {
	if ln.waiters.Len() == 0 && !ln.pending && q.lines[key] == ln {
		if ln.timer != nil {
			ln.timer.Stop()
		}
		delete(q.lines, key)
	}
}
