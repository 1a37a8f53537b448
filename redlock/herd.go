package redlock

import (
	"crypto/sha1"
	"encoding/hex"
	"slices"
	"sync"
	"time"
)

// The waits of one Locker on a key form one line (internal/waitq): a release wakes
// the first waiter only, and the next one when the woken caller does not start its
// TryLock within the handoff time or its attempt fails for another reason than
// contention. So a release costs each Locker with waiters one attempt, not one per
// waiter.
//
// A release publishes the SHA-1 of the released token (releaseScript). Which
// releases matter is the Locker's view of the key, a set of digests: a holder's
// digest joins it when a TryLock of the Locker found the key held, or a Wait's read
// of the locks did, and its release could then free a quorum (the nodes it holds
// plus the nodes that were free or did not answer make a quorum). The clean-up of
// another waiter's failed attempt on a node or two then wakes nobody. An empty
// payload (an older publisher, or an Inbox that overflowed) always matters, and so
// does every release while the Locker knows nothing of the key yet. Unlock's
// release also names the Locker whose turn it is ("<digest>|<Locker ID>"): while the
// Locker is in the key's turns, that decides instead (turns.go).

// Bounds of the views: beyond maxViews keys the map is cleared (the views are
// learnt again, and until then every release matters); beyond maxDigests digests a
// view takes every release for one that matters.
const (
	maxViews   = 4096
	maxDigests = 64
)

// A keyView is what a Locker knows of the holders of one key.
type keyView struct {
	relevant map[string]struct{}
	all      bool // every release matters: too many digests
	unknown  bool // every release matters: nothing learnt yet
	// The digests last announced to the line (a ring), to announce each release
	// once, not once per node.
	announced [8]string
	next      int
	// Turns (turns.go): the Locker's last TryLock put it in the key's turns, and
	// the timer that wakes it when the Locker named by a release does not go.
	queued    bool
	turnTimer *time.Timer
	turnGen   uint64
	// The release that last woke the line (its digest), and how many more of
	// its messages wake the line again after a TryLock that came too early
	// (retry.go; 0: none).
	woke  string
	retry int
	// since is when the Locker began to wait on the key (turnSince; 0: not yet, or
	// it took the key since).
	since int64
}

// views are a Locker's keyViews, by key.
type views struct {
	mu sync.Mutex
	m  map[string]*keyView
	// kept keeps the since of a view that forget dropped, for turnSince (turns.go).
	kept map[string]keptSince
}

// A keptSince is the since of a dropped view, and when it was dropped.
type keptSince struct {
	since int64
	at    time.Time
}

// get returns key's view, making one when create is set. v.mu is held.
func (v *views) get(key string, create bool) *keyView {
	kv := v.m[key]
	if kv == nil && create {
		if v.m == nil || len(v.m) >= maxViews {
			for _, old := range v.m {
				old.stopTurn()
			}
			v.m = make(map[string]*keyView)
		}
		kv = &keyView{relevant: make(map[string]struct{})}
		v.m[key] = kv
	}
	return kv
}

// learn records what an attempt or a read saw of key: holders maps each other
// token's digest to the nodes it holds, and maybeFree is the number of nodes that
// were free or did not answer. A holder whose release could free a quorum joins the
// view.
func (l *Locker) learn(key string, holders map[string]int, maybeFree int) {
	l.views.mu.Lock()
	defer l.views.mu.Unlock()
	kv := l.views.get(key, true)
	kv.unknown = false
	for d, c := range holders {
		if maybeFree+c < l.quorum {
			continue
		}
		if len(kv.relevant) >= maxDigests {
			kv.all = true
			return
		}
		kv.relevant[d] = struct{}{}
	}
}

// released acts on release messages of key that a Wait of l received: when one of
// them matters and was not announced yet, it wakes the first waiter of key's line.
// A release that names a turn (turns.go) matters when it names l, or nobody while l
// is queued; while l is queued, one that names another Locker does not.
func (l *Locker) released(key string, msgs []string) {
	if len(msgs) == 0 {
		return
	}
	wake := false
	l.views.mu.Lock()
	kv := l.views.get(key, false)
	for _, m := range msgs {
		d, next, named := parseRelease(m)
		l.heard.add(d)
		if kv != nil && kv.retry > 0 && d != "" && d == kv.woke { // retry.go
			if kv.retry--; kv.retry == 0 {
				kv.stopTurn()
				wake = true
			}
			continue
		}
		if d != "" && kv != nil && slices.Contains(kv.announced[:], d) {
			continue // announced already (the same release on another node)
		}
		if kv == nil {
			kv = l.views.get(key, true)
			kv.unknown = true // until learnt, every release matters
		}
		turn := false
		if named {
			w, skip := l.turn(key, kv, next)
			if skip {
				continue
			}
			turn = w
		}
		if !turn && d != "" {
			if _, ok := kv.relevant[d]; !ok && !kv.all && !kv.unknown {
				continue
			}
		}
		if d != "" {
			kv.announced[kv.next] = d
			kv.next = (kv.next + 1) % len(kv.announced)
		}
		kv.woke, kv.retry = d, 0
		kv.stopTurn()
		wake = true
	}
	l.views.mu.Unlock()
	if wake {
		l.queue.Released(key)
	}
}

// forget drops key's view once no Wait of l waits on key; its since is kept
// (turns.go).
func (l *Locker) forget(key string) {
	if l.queue.Len(key) > 0 {
		return
	}
	l.views.mu.Lock()
	if kv := l.views.m[key]; kv != nil {
		kv.stopTurn()
		delete(l.views.m, key)
		if kv.since != 0 {
			l.views.keep(key, kv.since, time.Now())
		}
	}
	l.views.mu.Unlock()
}

// acquired records that l took key with token: its release matters to l's Waits on
// key, whichever holders they saw (they need not have seen this one).
func (l *Locker) acquired(key, token string) {
	if l.queue.Len(key) == 0 {
		return // nobody waits: spare the hash
	}
	sum := sha1.Sum([]byte(token))
	l.learn(key, map[string]int{hex.EncodeToString(sum[:]): len(l.nodes)}, 0)
}
