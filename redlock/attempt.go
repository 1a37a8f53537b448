package redlock

import (
	"context"
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

// late is phase 1's handler of node i's answer after the fan-out stopped waiting
// for it: settled at once when the outcome is known, else when TryLock returns
// (settleEarly).
func (a *acquisition) late(i int, v phase1, err error) {
	e := lateReply{i, v, err}
	if a.att.lateAnswer(e) {
		a.settle(e)
		a.att.settled(a.l, a.token)
	}
}

// settleEarly settles the late answers that came before the outcome was known.
func (a *acquisition) settleEarly() {
	for _, e := range a.att.early {
		if e.err == nil && !e.v.locked && e.v.out == nil {
			a.att.settled(a.l, a.token)
			continue
		}
		a.l.group.Go(func() {
			a.settle(e)
			a.att.settled(a.l, a.token)
		})
	}
}

// settle acts on a late answer once the attempt's outcome is known: a node that
// was kept out is adopted (adopt.go); a lock it made joins the lease (its counter
// raised to the lease's fence) when the attempt succeeded and the lease was not
// unlocked meanwhile, and is released otherwise (also on a node whose outcome is
// unknown), with a fresh context bounded by Options.CleanupTimeout.
func (a *acquisition) settle(e lateReply) {
	l, att := a.l, a.att
	if e.err == nil && e.v.out != nil { // kept out: adopt it (adopt.go)
		if att.succeeded && e.v.out.epoch == a.token {
			l.tagLater(a.ctx, e.i, a.token) // found empty in a running deployment
		}
		l.adoptLater(e.i, max(e.v.out.left, 0))
		return
	}
	if e.err == nil && !e.v.locked {
		return // another owner's lock: nothing of ours
	}
	if att.succeeded && !att.unlocked.Load() && e.err == nil && e.v.fence == att.fence {
		return // in step: the lock already records the lease's fence
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), l.opts.CleanupTimeout)
	defer cancel()
	if att.succeeded && !att.unlocked.Load() {
		_, _ = l.raiseOn(cctx, e.i, a.n, a.token, att.fence)
	} else {
		_, _ = l.releaseOn(cctx, e.i, newReleaseCall(a.n, a.token))
	}
}
