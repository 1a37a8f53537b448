package conformance

import (
	"fmt"
	"slices"
	"time"
)

// checkWaits: the Waiter contract, as distlock.Lock sees it. A Lock must not go on
// waiting for longer than b.Wait while its key is free: no other acquisition could
// hold it (maybeHeld), and no fault stood in the way.
func checkWaits(h []Event, b Bounds) []Violation {
	if b.Wait == 0 {
		return nil
	}
	var vs []Violation
	held := maybeHeld(h, b)
	for _, e := range h {
		if e.Op != OpLock || faulted(h, e, b) {
			continue
		}
		var others []*span
		for _, sp := range held[e.Key] {
			if sp.events[0] != e {
				others = append(others, sp)
			}
		}
		if from, gap := longestGap(others, e.Invoke, e.Return); gap > b.Wait {
			vs = append(vs, Violation{rWaiter, fmt.Sprintf("client %d's Lock(%s) went on waiting %v while the key was free (from %v)",
				e.Client, short(e.Key), gap, from), []Event{e}})
		}
	}
	return vs
}

// faulted reports whether a fault of e's client, or of the servers, came while
// e ran (or b.Recovery before it).
func faulted(h []Event, e Event, b Bounds) bool {
	return slices.ContainsFunc(h, func(f Event) bool {
		return f.Op == OpFault && (f.Client == -1 || f.Client == e.Client) && f.Invoke < e.Return && e.Invoke < f.Return+b.Recovery
	})
}

// longestGap returns the longest stretch of [from, to] that no span covers.
func longestGap(spans []*span, from, to time.Duration) (at, gap time.Duration) {
	slices.SortFunc(spans, func(a, b *span) int { return int(a.from - b.from) })
	cur := from
	for _, sp := range spans {
		if sp.from > cur && sp.from-cur > gap && cur < to {
			at, gap = cur, min(sp.from, to)-cur
		}
		cur = max(cur, sp.to)
	}
	if to > cur && to-cur > gap {
		at, gap = cur, to-cur
	}
	return at, gap
}
