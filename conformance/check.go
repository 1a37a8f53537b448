package conformance

import (
	"fmt"
	"slices"
	"time"
)

// Bounds are what Check allows a backend beyond the contract's exact times.
type Bounds struct {
	// Ctx is how long after its context's deadline a call may return, and how long
	// after its lease's latest Expires a Held's Context may end.
	Ctx time.Duration
	// Clock absorbs the scheduler between the caller's clock reading and the
	// backend's: a lease's Expires may lie up to Clock beyond Invoke + TTL.
	Clock time.Duration
	// Grace is how long after its Expires (or its ttl from an attempt of unknown
	// outcome) a key may still be held on the server: an ErrLocked needs a lease
	// that could be held then. Session, for a backend whose leases live as long as
	// their session, makes every lease possibly held until it is unlocked or its
	// client closed or crashed.
	Grace   time.Duration
	Session bool
	// Recovery is how long after a fault of the servers (an OpFault of Client -1)
	// an ErrLocked is not judged: a paused server's keys, a new leader's leases
	// may outlive their ttl until then.
	Recovery time.Duration
	// Cleanup is how soon after an attempt of unknown outcome returned its
	// half-made lock must be gone (rule 5), once no fault of its client stands
	// in the way; zero leaves such an attempt its ttl.
	Cleanup time.Duration
	// Wait is how long a distlock.Lock may go on waiting while its key is free;
	// zero does not check it (a Locker that is no Waiter polls).
	Wait time.Duration
}

// A Violation is one broken rule and the events of the history that show it.
type Violation struct {
	Rule   string
	What   string
	Events []Event
}

func (v Violation) String() string { return v.Rule + ": " + v.What }

// A window is a held lease of a history, as its holder saw it: each successful
// acquisition or Renew told it the lease holds from its return until the Expires
// it returned (grants), until the holder let it go (cut): the invocation of its
// first Unlock, or its client's Close (the holder stops using a lease before it
// gives it up). A Renew or Unlock of unknown outcome told it nothing.
type window struct {
	key, token string
	fence      uint64
	acquire    Event
	start      time.Duration // the acquisition's return
	grants     []interval
	cut        time.Duration // -1 while the holder did not let it go
	events     []Event       // the acquisition, then its other calls in history order
}

type interval struct{ from, to time.Duration }

// held returns the stretches in which w's holder believed it held the key.
func (w *window) held() []interval {
	var r []interval
	for _, g := range w.grants {
		if w.cut >= 0 {
			g.to = min(g.to, w.cut)
		}
		if g.to > g.from {
			r = append(r, g)
		}
	}
	return r
}

// letGo records that the holder let the lease go at t.
func (w *window) letGo(t time.Duration) {
	if w.cut < 0 || t < w.cut {
		w.cut = t
	}
}

// Check returns the violations of the contract's rules in history h: rule 1 (two
// holders of a key whose held windows overlap), rule 3 (a fence that does not
// increase in real-time order of acquisition), rule 6 (a call that returned past
// its deadline plus b.Ctx), rule 8 (a lease returned already expired, or with
// Expires beyond its invocation plus ttl plus b.Clock) and Hold's rule (a Held's
// Context that ended past its lease's latest Expires plus b.Ctx). A Renew or
// Unlock whose outcome is unknown changes nothing that its holder was told, so
// it leaves the window as it was.
func Check(h []Event, b Bounds) []Violation {
	var vs []Violation
	vs = append(vs, checkCalls(h, b)...)
	leases := leasesOf(h)
	vs = append(vs, checkLocked(h, b)...)
	vs = append(vs, checkExclusion(leases)...)
	vs = append(vs, checkFences(leases)...)
	vs = append(vs, checkHeld(h, leases, b)...)
	vs = append(vs, checkRenewals(leases)...)
	vs = append(vs, checkWaits(h, b)...)
	return vs
}

// checkCalls checks each call alone: rules 6 and 8.
func checkCalls(h []Event, b Bounds) []Violation {
	var vs []Violation
	crashed := map[int]time.Duration{} // when a client crashed: it is not used after
	for _, f := range h {
		if f.Op == OpFault && f.Err == "Crash" {
			crashed[f.Client] = f.Invoke
		}
	}
	for _, e := range h {
		if e.Op == OpHeldEnd {
			continue
		}
		at, crash := crashed[e.Client]
		if took := e.Return - e.Invoke; e.Deadline > 0 && took > e.Deadline+b.Ctx && !(crash && at < e.Return) {
			vs = append(vs, Violation{rContext, fmt.Sprintf("client %d's %s(%s) with a %v deadline returned after %v", e.Client, e.Op, short(e.Key), e.Deadline, took), []Event{e}})
		}
		if e.Outcome != "" || (e.Op != OpTryLock && e.Op != OpLock && e.Op != OpRenew) {
			continue
		}
		if e.Expires <= e.Return {
			vs = append(vs, Violation{rLease, fmt.Sprintf("client %d's %s(%s) returned a lease already expired (%v before it returned)", e.Client, e.Op, short(e.Key), e.Return-e.Expires), []Event{e}})
		}
		if e.Op != OpLock && e.Expires > e.Invoke+e.TTL+b.Clock {
			vs = append(vs, Violation{rLease, fmt.Sprintf("client %d's %s(%s) returned Expires %v past its invocation + ttl %v", e.Client, e.Op, short(e.Key), e.Expires-e.Invoke-e.TTL, e.TTL), []Event{e}})
		}
	}
	return vs
}

// leasesOf rebuilds the held leases of h from their successful acquisitions.
func leasesOf(h []Event) map[string]*window {
	leases := map[string]*window{}
	for _, e := range h {
		if e.Token == "" {
			continue
		}
		l := leases[e.Token]
		switch {
		case l == nil && (e.Op == OpTryLock || e.Op == OpLock) && e.Outcome == "":
			l = &window{key: e.Key, token: e.Token, fence: e.Fence, acquire: e, start: e.Return, cut: -1,
				grants: []interval{{e.Return, e.Expires}}}
			leases[e.Token] = l
		case l == nil:
			continue
		case e.Op == OpRenew && e.Outcome == "":
			l.grants = append(l.grants, interval{e.Return, e.Expires})
		case e.Op == OpUnlock:
			l.letGo(e.Invoke)
		}
		l.events = append(l.events, e)
	}
	for _, e := range h {
		if e.Op != OpClose && e.Op != OpCrash {
			continue
		}
		for _, l := range leases {
			if l.acquire.Client == e.Client && e.Invoke < l.start {
				continue
			}
			if l.acquire.Client == e.Client {
				l.letGo(e.Invoke)
				l.events = append(l.events, e)
			}
		}
	}
	return leases
}

// byKey groups the leases per key, each group in order of acquisition.
func byKey(leases map[string]*window) map[string][]*window {
	keys := map[string][]*window{}
	for _, l := range leases {
		keys[l.key] = append(keys[l.key], l)
	}
	for _, ls := range keys {
		slices.SortFunc(ls, func(a, b *window) int { return int(a.start - b.start) })
	}
	return keys
}

// checkExclusion: rule 1.
func checkExclusion(leases map[string]*window) []Violation {
	var vs []Violation
	for key, ls := range byKey(leases) {
		for i, a := range ls {
			for _, b := range ls[i+1:] {
				at, over := overlap(a.held(), b.held())
				if over <= 0 {
					continue
				}
				vs = append(vs, Violation{rMutex, fmt.Sprintf("key %s: client %d (fence %d) and client %d (fence %d) both held it for %v from %v",
					short(key), a.acquire.Client, a.fence, b.acquire.Client, b.fence, over, at), append(slices.Clone(a.events), b.events...)})
			}
		}
	}
	return vs
}

// checkFences: rule 3, for acquisitions in real-time order (one returned before
// the other was invoked).
func checkFences(leases map[string]*window) []Violation {
	var vs []Violation
	for key, ls := range byKey(leases) {
		for _, a := range ls {
			for _, b := range ls {
				if a.acquire.Return < b.acquire.Invoke && b.fence <= a.fence {
					vs = append(vs, Violation{rFence, fmt.Sprintf("key %s: fence %d acquired after fence %d", short(key), b.fence, a.fence), []Event{a.acquire, b.acquire}})
				}
			}
		}
	}
	return vs
}

// checkHeld: a Held's Context ends by its lease's latest Expires plus b.Ctx (or
// by b.Ctx after Hold was called, for a lease that had expired by then).
func checkHeld(h []Event, leases map[string]*window, b Bounds) []Violation {
	var vs []Violation
	for _, e := range h {
		if e.Op != OpHeldEnd {
			continue
		}
		l := leases[e.Token]
		if l == nil {
			continue
		}
		latest := l.acquire.Expires
		for _, r := range l.events {
			if r.Op == OpRenew && r.Outcome == "" && r.Return <= e.Return {
				latest = max(latest, r.Expires)
			}
		}
		// A Held of a lease that had expired when Hold was called ends at once.
		if late := e.Return - max(latest, e.Invoke); late > b.Ctx {
			vs = append(vs, Violation{rHold, fmt.Sprintf("key %s: client %d's Held (fence %d) ended %v after its lease's latest Expires", short(l.key), e.Client, l.fence, late), append(slices.Clone(l.events), e)})
		}
	}
	return vs
}

// overlap returns the start and length of the first overlap of two sets of
// intervals (0 when none).
func overlap(a, b []interval) (at, length time.Duration) {
	for _, x := range a {
		for _, y := range b {
			from, to := max(x.from, y.from), min(x.to, y.to)
			if to > from {
				return from, to - from
			}
		}
	}
	return 0, 0
}
