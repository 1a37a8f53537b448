package redlock

import (
	"errors"
	"sync"
	"sync/atomic"
)

// An attempt records the outcome of one TryLock for the nodes that answer phase 1
// after it stopped waiting for them. A successful attempt with such nodes
// outstanding is registered in Locker.late under its token, so that Unlock can tell
// them to release rather than join the lease.
type attempt struct {
	mu          sync.Mutex
	done        bool
	succeeded   bool
	fence       int64
	early       []lateReply // late answers that came before the outcome was known
	outstanding int         // late answers not yet settled (known once done)
	unlocked    atomic.Bool
}

// A lateReply is a node's answer to phase 1 that came after TryLock stopped waiting.
type lateReply struct {
	i   int
	v   phase1
	err error
}

// lateAnswer reports whether node e.i's late answer is to be settled now (the outcome
// is known); otherwise it records it in a.early, which TryLock settles.
func (a *attempt) lateAnswer(e lateReply) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.done {
		a.early = append(a.early, e)
	}
	return a.done
}

// decide records the outcome, given phase 1's replies: every node that did not
// answer in time will answer late exactly once. After it, a.early no longer changes.
func (a *attempt) decide(l *Locker, token string, res []reply[phase1], succeeded bool, fence int64) {
	late := 0
	for _, r := range res {
		if r.ran && errors.Is(r.err, errNoReply) {
			late++
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.done, a.succeeded, a.fence, a.outstanding = true, succeeded, fence, late
	if succeeded && late > 0 {
		l.late.Store(token, a)
	}
}

// settled counts one late answer as settled.
func (a *attempt) settled(l *Locker, token string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.outstanding--; a.outstanding == 0 {
		l.late.Delete(token)
	}
}
