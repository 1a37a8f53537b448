package conformance

import (
	"fmt"
	"slices"
	"time"
)

// checkRenewals: rule 2. A Renew succeeds only for the lease it was given (same
// fence and token), only while the lease's holder was still told it held it (it
// was invoked before the latest Expires returned before it), and never after an
// Unlock of the lease returned nil.
func checkRenewals(leases map[string]*window) []Violation {
	var vs []Violation
	for _, l := range leases {
		var released time.Duration = -1
		for _, e := range l.events {
			if e.Op == OpUnlock && e.Outcome == "" && (released < 0 || e.Return < released) {
				released = e.Return
			}
		}
		for _, e := range l.events {
			if e.Op != OpRenew || e.Outcome != "" {
				continue
			}
			what := ""
			switch told := l.toldBefore(e.Invoke); {
			case e.Fence != l.fence || e.Err != "":
				what = fmt.Sprintf("returned another lease (fence %d for %d; %s)", e.Fence, l.fence, e.Err)
			case e.Invoke >= told:
				what = fmt.Sprintf("succeeded %v after the lease's Expires", e.Invoke-told)
			case released >= 0 && e.Invoke > released:
				what = "succeeded after an Unlock of the lease returned nil"
			default:
				continue
			}
			vs = append(vs, Violation{rOwner, fmt.Sprintf("key %s: client %d's Renew of fence %d %s", short(l.key), e.Client, l.fence, what), slices.Clone(l.events)})
		}
	}
	return vs
}

// toldBefore is the latest Expires the holder of l had been told by calls that
// returned before t.
func (l *window) toldBefore(t time.Duration) time.Duration {
	told := l.acquire.Expires
	for _, e := range l.events {
		if e.Op == OpRenew && e.Outcome == "" && e.Return < t {
			told = max(told, e.Expires)
		}
	}
	return told
}
