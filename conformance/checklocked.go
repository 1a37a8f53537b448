package conformance

import (
	"fmt"
	"slices"
	"time"
)

// A span is when a key could be held on the server by one acquisition: from its
// attempt's invocation until its Expires (or, for an attempt of unknown outcome,
// its invocation plus ttl) plus grace, extended by every Renew that may have
// reached the server, and cut by an Unlock that returned nil.
type span struct {
	from, to time.Duration
	expires  time.Duration // the latest Expires it was, or may have been, given
	events   []Event
}

// maybeHeld returns, per key, the spans in which the key could be held.
func maybeHeld(h []Event, b Bounds) map[string][]*span {
	const forever = time.Duration(1<<63 - 1)
	byToken := map[string]*span{}
	keys := map[string][]*span{}
	for _, e := range h {
		switch {
		// An attempt that failed with ErrClosed may have been in flight when its
		// Locker closed: like a ctx error, its outcome is unknown.
		case (e.Op == OpTryLock || e.Op == OpLock) && (e.Outcome == "" || e.Outcome == OutCtx || e.Outcome == OutOther || e.Outcome == OutClosed):
			to := e.Invoke + e.TTL + b.Grace
			switch {
			case b.Session:
				to = forever // a session keeps its nodes
			case e.Outcome == "":
				to = e.Expires + b.Grace
			case e.Op == OpLock:
				to = e.Return + e.TTL + b.Grace // its last attempt started before it returned
			}
			if e.Outcome != "" {
				to = min(to, cleanedBy(h, e, b))
			}
			sp := &span{from: e.Invoke, to: to, expires: max(e.Expires, e.Return+e.TTL), events: []Event{e}}
			if e.Token != "" {
				byToken[e.Token] = sp
			}
			keys[e.Key] = append(keys[e.Key], sp)
		case e.Op == OpRenew && e.Outcome != OutNotHeld && e.Outcome != OutInvalid && byToken[e.Token] != nil:
			sp := byToken[e.Token]
			sp.expires = max(sp.expires, e.Invoke+e.TTL)
			if !b.Session {
				sp.to = max(sp.to, e.Invoke+e.TTL+b.Grace)
			}
			sp.events = append(sp.events, e)
		case e.Op == OpUnlock && e.Outcome == "" && byToken[e.Token] != nil:
			sp := byToken[e.Token]
			sp.to = min(sp.to, e.Return)
			sp.events = append(sp.events, e)
		}
	}
	if b.Session {
		// A crashed client's session ends, and its nodes with it; a closed client
		// deletes its nodes, at the latest when their Expires passes.
		for _, e := range h {
			if e.Op != OpClose && e.Op != OpCrash {
				continue
			}
			for _, sps := range keys {
				for _, sp := range sps {
					if sp.events[0].Client != e.Client || sp.to != forever {
						continue
					}
					sp.to = e.Return + b.Grace
					if e.Op == OpClose {
						sp.to = max(sp.expires, e.Return) + b.Grace
					}
				}
			}
		}
	}
	return keys
}

// checkLocked: rule 5, an ErrLocked answer needs another acquisition that could
// hold the key during the call.
func checkLocked(h []Event, b Bounds) []Violation {
	var vs []Violation
	held := maybeHeld(h, b)
	var faults []Event
	for _, e := range h {
		if e.Op == OpFault && e.Client == -1 {
			faults = append(faults, e)
		}
	}
	for _, e := range h {
		if e.Op != OpTryLock || e.Outcome != OutLocked {
			continue
		}
		if slices.ContainsFunc(faults, func(f Event) bool { return f.Invoke < e.Return && e.Invoke < f.Return+b.Recovery }) {
			continue
		}
		free := !slices.ContainsFunc(held[e.Key], func(sp *span) bool {
			return sp.from < e.Return && sp.to > e.Invoke
		})
		if free {
			vs = append(vs, Violation{rErrors, fmt.Sprintf("client %d's TryLock(%s) returned ErrLocked while no acquisition could hold the key", e.Client, short(e.Key)), []Event{e}})
		}
	}
	return vs
}

// cleanedBy is when the half-made lock of e, an attempt of unknown outcome, must
// be gone: b.Cleanup after it returned. A clean-up is bounded, so a fault of its
// client or of the servers meanwhile may make it give up, and a crash or Close of
// its client may stop it: then the lock lapses by its ttl (never is returned).
// With b.Cleanup zero it is never checked.
func cleanedBy(h []Event, e Event, b Bounds) time.Duration {
	const never = time.Duration(1<<63 - 1)
	if b.Cleanup == 0 {
		return never
	}
	by := e.Return + b.Cleanup
	for _, f := range h {
		mine := f.Client == e.Client
		switch {
		case f.Return < e.Invoke || f.Invoke > by:
		case mine && (f.Op == OpClose || f.Op == OpCrash):
			return never
		case f.Op == OpFault && (mine || f.Client == -1):
			return never
		}
	}
	return by
}
