package redlock

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/distlock/distlock/internal/redisx"
)

// Turns: which Locker tries a released key first.
//
// Every Locker with waiters on a key that a release wakes would otherwise try it at
// once, each with a round on every master: one of them wins, and the others' rounds
// (and their clean-ups) only slow the winner's down. Each master therefore keeps the
// key's turns, a sorted set of the IDs of the Lockers that wait on the key (every
// Locker has a random ID), scored by the time since which the Locker waits: the
// start of its first TryLock that found the key held since it last took the key
// (turnSince; the same score on every master, whichever attempt or read added it
// there, so that the masters agree on the order). A TryLock
// of a Locker that waits on the key (its Waits' subscription to the key's channel
// is open) adds the Locker, unless it is there already, on the masters where it
// finds the key held, and, when it fails for contention, on those where it releases
// its own locks; one that takes a master's lock removes its Locker there, or puts
// it at the end when the Locker has more waiters on the key. A TryLock of a Locker
// that does not wait on the key leaves the turns alone. A Wait's read of the locks
// (waitScript) of a Locker that is not queued (below) adds it too, on the masters
// where it finds the key held, so that a Locker whose TryLock came before its
// Waits subscribed is in the turns as well. Unlock's release (releaseTurnScript) takes the first Locker out of every
// master's turns and names it in the release: "<digest>|<Locker ID>"; an Unlock by a
// Locker with no waiters left on the key first takes that Locker out.
//
// Each Locker's Waits on a key subscribe to its turn channel of the key
// ("<channel>|<Locker ID>", turnChannel) beside the key's channel, and Unlock's
// release goes to the turn channels of the Locker named and of the one after it in
// the turns, not to the key's channel: the other Lockers in line would only ignore
// it, so a release costs two messages per master, not one per Locker in line per
// master, each read and judged by that Locker. The release goes to the key's
// channel when it names nobody, or when the turn channel of one of the two has no
// subscriber (that Locker waits no more: the others then hear it and time their
// turn as below). The Locker after the one named hears it so that it can try when
// the Locker named does not go (its turn channel was still subscribed, but its
// last waiter had left); and a Locker whose turn channel hears a release while it
// has no Wait on the key passes the release on to the key's channel of that master
// (passTurn), so that when neither of the two goes, the others in line hear it
// and time their turn as after any release that names another Locker (below).
// The clean-ups of failed attempts still publish
// on the key's channel.
//
// A Locker whose last TryLock of the key, or its Wait's read, added it to the turns
// (it is queued) then wakes its first waiter only on a release that names it, or on
// a release that names nobody (the turns are empty: they expired, or every Locker
// had its turn). On a release that names another Locker (the one after it in line
// hears it, and every Locker when it goes to the key's channel) it stays asleep,
// and wakes after 50ms (defaultTurnTimeout) unless another release comes
// meanwhile: the Locker named may have no waiter left, or may have been given the
// turn on one master only. A Locker that is not queued (its Wait's read found the
// key free, or has not come yet) wakes on the releases that matter to it
// (herd.go). The turns decide nothing about who holds the key: every Locker still takes it with a
// full TryLock; they only decide who tries first, so a release costs one round,
// not one per Locker.
//
// The masters' turns may disagree (a Locker added on some masters only, a master
// that missed an Unlock): a release then names two Lockers or three, still fewer
// than every Locker with waiters.

// defaultTurnTimeout is how long a queued Locker waits, after a release that named
// another Locker, before it tries the key anyway: longer than a loaded machine's
// handoff, so that the Lockers in line do not all try the key while the one named
// takes it.
const defaultTurnTimeout = 50 * time.Millisecond

// Modes of an acquireCall for the key's turns (ARGV[6] of acquireScript).
const (
	turnNone  = ""  // not waiting: the turns are left alone
	turnWait  = "w" // waiting: join the turns when the key is held
	turnAgain = "a" // more waiters: join when held, and go to the end on taking it
)

// turnsName returns the Redis name of key's turns, given its names n (it shares
// their hash tag).
func turnsName(n redisx.Names, key string) string {
	base := len(n.Lock) - len(key) - len("lock:")
	return n.Lock[:base] + "turns:" + key
}

// turnMode returns the acquireCall mode of a TryLock of key: whether the Locker
// waits on key (a Wait's subscription is open, seen has peeks) and has waiters left.
func (l *Locker) turnMode(key string, seen peeks) string {
	switch {
	case !l.uses(useTurns):
		return turnNone
	case l.queue.Len(key) > 0:
		return turnAgain
	case seen.toks != nil:
		return turnWait
	}
	return turnNone
}

// parseRelease splits a release message into the released token's digest and the
// Locker whose turn it is; named reports whether the message names a turn at all
// (Unlock's release; not a clean-up's, nor an older version's).
func parseRelease(msg string) (digest, next string, named bool) {
	digest, next, named = strings.Cut(msg, "|")
	return digest, next, named
}

// turnSince returns l's score when it joins key's turns (acquireScript, the
// clean-up of its attempt, waitScript): since when l waits on key, in microseconds
// since 1970, now when it did not wait yet. It is the same for every attempt and
// every Wait's read of l until l takes the key, so that whichever of them reaches a
// node first, every node gives l the same place in line. That holds across the
// gaps between l's Waits too (a Wait ends, its TryLock fails, the next Wait
// begins: forget drops the view in between), for up to keepSince after the last
// Wait ended: a release that named l on some nodes only took l out there, and l's
// next TryLock puts it back there at its old place, not at the end; with a new
// score, the nodes would disagree on the order from then on, and their releases
// would name two Lockers at once (both try the key, and one of them loses a round).
func (l *Locker) turnSince(key string, now int64) int64 {
	l.views.mu.Lock()
	defer l.views.mu.Unlock()
	kv := l.views.get(key, true)
	if kv.since == 0 {
		kv.since = now
		if k, ok := l.views.kept[key]; ok {
			if time.Since(k.at) < keepSince {
				kv.since = k.since
			}
			delete(l.views.kept, key)
		}
	}
	return kv.since
}

// keepSince is how long a Locker keeps its place in a key's turns (turnSince) after
// its last Wait on the key ended: longer than the gap between the Waits of a wait
// loop (distlock.Lock backs off at most a second by default), short enough that a
// Locker that gave up does not come back at the head of the line.
const keepSince = 10 * time.Second

// keep records since as key's since of a view dropped at now. v.mu is held.
func (v *views) keep(key string, since int64, now time.Time) {
	if v.kept == nil {
		v.kept = make(map[string]keptSince)
	}
	if len(v.kept) >= maxViews {
		for k, e := range v.kept {
			if now.Sub(e.at) >= keepSince {
				delete(v.kept, k)
			}
		}
		if len(v.kept) >= maxViews {
			clear(v.kept)
		}
	}
	v.kept[key] = keptSince{since, now}
}

// took records that l took key: its waiting on key (turnSince) starts anew.
func (l *Locker) took(key string) {
	l.views.mu.Lock()
	defer l.views.mu.Unlock()
	if kv := l.views.get(key, false); kv != nil {
		kv.since = 0
	}
	delete(l.views.kept, key)
}

// turnScore reports whether a Wait's read of key's locks is to add l to key's
// turns (waitScript), and with which score (turnSince): when l is not queued (its
// last TryLock of key did not add it: l did not wait on key yet). A queued l is in
// the turns where that TryLock found key held, and stays out where a release took
// it out.
func (l *Locker) turnScore(key string) (score int64, join bool) {
	l.views.mu.Lock()
	kv := l.views.get(key, false)
	queued := kv != nil && kv.queued
	l.views.mu.Unlock()
	if queued || !l.uses(useTurns) {
		return 0, false
	}
	return l.turnSince(key, time.Now().UnixMicro()), true
}

// queued records whether the last TryLock of key added l to the key's turns.
func (l *Locker) queued(key string, q bool) {
	l.views.mu.Lock()
	defer l.views.mu.Unlock()
	if kv := l.views.get(key, q); kv != nil {
		kv.queued = q
	}
}

// turn decides what a release message that names a turn means to kv, a view of
// key: wake (it is l's turn, or nobody's and l is queued), skip (another Locker's
// turn while l is queued: the turn timer is armed), or neither, when the release is
// to be judged by the view's holders. l.views.mu is held.
func (l *Locker) turn(key string, kv *keyView, next string) (wake, skip bool) {
	switch {
	case next == l.id:
		kv.queued = false
		return true, false
	case !kv.queued:
		return false, false
	case next == "":
		kv.queued = false
		return true, false
	}
	// Another Locker's turn: wake after l.turnTimeout unless a release comes first.
	kv.turnGen++
	gen := kv.turnGen
	if kv.turnTimer != nil {
		kv.turnTimer.Stop()
	}
	kv.turnTimer = time.AfterFunc(l.turnTimeout, func() { l.turnExpired(key, kv, gen) })
	return false, true
}

// turnExpired wakes key's first waiter when no release came within l.turnTimeout of
// the one that named another Locker.
func (l *Locker) turnExpired(key string, kv *keyView, gen uint64) {
	l.views.mu.Lock()
	live := l.views.m[key] == kv && kv.turnGen == gen
	if live {
		kv.queued = false
	}
	l.views.mu.Unlock()
	if live {
		l.queue.Released(key)
	}
}

// stopTurn stops kv's turn timer. l.views.mu is held.
func (kv *keyView) stopTurn() {
	kv.turnGen++
	if kv.turnTimer != nil {
		kv.turnTimer.Stop()
		kv.turnTimer = nil
	}
}

// turnChannel returns the Redis name of l's turn channel of key, given its names n:
// a release that names l publishes there (releaseTurnScript), and l's Waits on key
// subscribe to it beside the key's channel.
func turnChannel(n redisx.Names, id string) string { return n.Channel + "|" + id }

// passTurn passes on a release that came to l's turn channel (channel) of a key
// on node i while l has no Wait on the key: its last Wait left, and the hub keeps
// the channel subscribed for a while, so the release script saw a subscriber and
// sent the release to the turn channels only. l may be the Locker named or the one
// after it; if both have no Wait left, the others in line would hear nothing and
// sleep until their Wait's bound. passTurn publishes the message unchanged on the
// key's channel of that node, where every Locker waiting on the key hears it and
// times its turn as after any release that names another Locker (or takes it, when
// it names nobody). It is the hub's Unheard hook: it must not block.
func (l *Locker) passTurn(i int, channel, msg string) {
	keyChannel, ok := strings.CutSuffix(channel, "|"+l.id)
	if !ok {
		return
	}
	if d, _, _ := parseRelease(msg); l.heard.has(d) {
		// A Wait of l took this release from another master (usually the Wait
		// of the Locker named, which woke on the first master's message and left
		// before the others' came): l acted on it.
		return
	}
	if l.group.Enter() != nil {
		return
	}
	defer l.group.Leave()
	l.group.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), l.opts.CleanupTimeout)
		defer cancel()
		_ = l.nodes[i].Client.Publish(ctx, keyChannel, msg).Err()
	})
}

// A heardRing holds the digests of the last releases that l's Waits took, of any
// key: a release that came to l's turn channel while l had no Wait on the key is
// passed on (passTurn) only when no Wait of l took it from another master.
type heardRing struct {
	mu   sync.Mutex
	d    [16]string
	next int
}

func (r *heardRing) add(d string) {
	if d == "" {
		return
	}
	r.mu.Lock()
	r.d[r.next] = d
	r.next = (r.next + 1) % len(r.d)
	r.mu.Unlock()
}

func (r *heardRing) has(d string) bool {
	if d == "" {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.d[:], d)
}
