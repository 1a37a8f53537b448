package etcdlock

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The chase: a Wait whose key is held by an etcd lease that its holder stopped
// refreshing frees the key itself once the cluster's leader holds that lease
// expired, instead of waiting up to 500ms more for the leader's periodic expiry
// check (etcd's lessor revokes expired leases only every 500ms). See "Failover"
// in the package doc for why this is safe; in short:
//
//   - LeaseTimeToLive reports the leader's remaining time truncated to whole
//     seconds: TTL k >= 1 means [k, k+1) s left, 0 means (-1, 1) s, and <= -1
//     means expired for a second or more (or gone). The chase probes it, and
//     learns that the lease has expired at the leader from one probe that
//     answers -1 or less, or from a chain of probes that each answer 0 and
//     leave no room for a refresh in between (chaseVerdict).
//   - The probes and the read that confirms them must be answered at one raft
//     term (their headers), each probe by a member whose previous answer had
//     that term already, and the read is linearizable: so the answering lessor
//     was the cluster's (the leader of that term), not a stale leader's.
//   - Renew never revives a lease (the contract's rule: a refresh or move
//     answered at or after the Lease's Expires does not count), and TryLock
//     never counts a refresh of a spare answered after the spare's expiry: so
//     once the leader holds the lease expired, no holder's Expires on it can
//     move past that moment, even when a new leader revives the lease before
//     the revocation applies. The chase puts no rule of its own on holders.

// Timing of the chase.
const (
	// chaseMargin is added to every bound that mixes the leader's clock with the
	// client's, for their drift (a few parts per million over seconds) and the
	// timer's slack.
	chaseMargin = 5 * time.Millisecond
	// chaseNarrow ends the bisection of the lease's expiry: the chain's first
	// probe is sent within about this much after the leader's TTL drops below 1s.
	chaseNarrow = 40 * time.Millisecond
	// chaseStep is the longest step towards E - 1s once the bisection cannot
	// go on: the chain's first probe comes at most this much after E - 1s.
	chaseStep = 80 * time.Millisecond
	// chaseLead is how long before the holder's lease would expire (its ttl from
	// when it was seen) the chase sends its first probe: early enough for the
	// bisection's probes two seconds ahead on a lease of 3s, and late enough
	// that the Waits of a key handed on within half a second (distlock.Lock's
	// usual case) send no probe.
	chaseLead = 2500 * time.Millisecond
)

// A ttlProbe is one LeaseTimeToLive of the holder's lease.
type ttlProbe struct {
	sent, recv time.Time // on the client, before the request and after the reply
	ttl        int64     // the reported TTL: the leader's remaining seconds, truncated
	granted    int64     // the lease's TTL, seconds
	member     uint64    // the member that answered
	term       uint64    // its raft term when it answered
	// bracketed: the member's previous answer (before p was sent) had term too,
	// so the member's term was term throughout p, and it asked the leader of
	// that term (or was that leader).
	bracketed bool
}

// chaseState is what the probes so far tell of the lease's expiry E (on the
// client's clock). lo and hi bound E assuming no refresh since they were set; they
// only schedule the probes. Safety rests on the chain alone.
type chaseState struct {
	terms  map[uint64]uint64 // by member: the term of its latest answer
	term   uint64            // the term of the probes below
	lo, hi time.Time         // E in [lo, hi); zero: unknown
	chain  []ttlProbe        // the probes since the last that answered >= 1, if each answered 0
	// calm: a probe showed the lease refreshed, so its holder was alive then;
	// from then on the chase probes about once per period of the lease, not
	// bisecting nor stepping, to cost a live holder's leader little.
	calm bool
}

// saw records that member answered at term, and reports whether its previous
// answer had that term too.
func (c *chaseState) saw(member, term uint64) bool {
	if c.terms == nil {
		c.terms = make(map[uint64]uint64)
	}
	prev, ok := c.terms[member]
	c.terms[member] = term
	return ok && prev == term
}

// reset forgets what earlier probes told.
func (c *chaseState) reset() {
	c.lo, c.hi, c.chain = time.Time{}, time.Time{}, c.chain[:0]
}

// observe takes probe p and returns expired when the lease has expired at the
// leader with no refresh since the chain began (the caller then confirms with a
// linearizable read answered at the same term, and revokes), or else when to
// send the next probe; a zero next means give up (the lease's TTL is too short
// for the chain).
func (c *chaseState) observe(p ttlProbe) (expired bool, next time.Time) {
	p.bracketed = c.saw(p.member, p.term)
	if p.term != c.term {
		c.reset()
		c.term = p.term
	}
	sec := time.Second
	switch {
	case p.ttl < 0:
		// At least a second past its expiry (or gone: the read tells).
		if chaseVerdict([]ttlProbe{p}) {
			return true, time.Time{}
		}
		return false, p.recv.Add(chaseStep)
	case p.ttl >= 1:
		c.chain = c.chain[:0]
		lo, hi := p.sent.Add(time.Duration(p.ttl)*sec), p.recv.Add(time.Duration(p.ttl+1)*sec)
		if c.hi.IsZero() || !lo.Before(c.hi) || !c.lo.Before(hi) {
			// First probe, or the lease was refreshed since the others.
			c.calm = c.calm || !c.hi.IsZero()
			c.lo, c.hi = lo, hi
		} else {
			c.lo, c.hi = later(c.lo, lo), minTime(c.hi, hi)
		}
		// Send the chain's first probe just after E - 1s: once E is known
		// within chaseNarrow, at hi - 1s. Until then, bisect with probes two
		// seconds ahead of the middle, which answer 1 or 2 and so never pass
		// E - 1s (on a lease of 3s or more: a shorter one's holder refreshes
		// less than 2s before E); when that time has passed, step towards
		// E - 1s from lo - 1s.
		w := c.hi.Sub(c.lo)
		switch mid := c.lo.Add(w/2 - 2*sec); {
		case w <= chaseNarrow || c.calm:
			next = c.hi.Add(-sec + chaseMargin)
		case p.granted >= 3 && !mid.Before(p.recv):
			next = mid
		default:
			next = c.lo.Add(-sec + min(w/2, chaseStep))
		}
		return false, next
	}
	// p.ttl == 0: E < p.recv + 1s, or a refresh came after p.
	span := time.Duration(p.granted-1)*sec - chaseMargin // the longest link of a chain
	if span <= 0 {
		return false, time.Time{}
	}
	if n := len(c.chain); n > 0 && p.recv.Sub(c.chain[n-1].sent) > span || !p.bracketed {
		c.chain = c.chain[:0] // too long a link, or p's lessor unknown: start anew
	}
	if !p.bracketed {
		return false, p.recv.Add(chaseStep)
	}
	c.chain = append(c.chain, p)
	if chaseVerdict(c.chain) {
		return true, time.Time{}
	}
	// The next probe: once E has passed, unless that would make too long a
	// link (a lease of 2s): then halfway there.
	next = c.chain[0].recv.Add(sec + chaseMargin)
	if next.Sub(p.sent) > span-2*p.recv.Sub(p.sent)-chaseMargin {
		next = p.sent.Add(next.Sub(p.sent) / 2)
	}
	return false, next
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// chaseVerdict is the rule that observe applies, stated on its own for the doc
// and the tests: the lease has expired at the leader by the time p was answered
// when p reports a TTL <= -1, or when a chain first, ..., p of probes that each
// report 0, all answered at one term (and each bracketed), has each link (from a probe's
// sending to the next one's reply) at most granted - 1s long, and p was sent at
// least 1s after first's reply. Proof: first's 0 means E < first.recv + 1s <= p.sent;
// a refresh after a probe a would leave more than granted - (b.recv - a.sent) >= 1s
// at the next probe b, which would then report >= 1.
func chaseVerdict(chain []ttlProbe) bool {
	if len(chain) == 0 {
		return false
	}
	p := chain[len(chain)-1]
	if p.ttl < 0 {
		return p.bracketed
	}
	first := chain[0]
	if !p.sent.Before(first.recv.Add(time.Second + chaseMargin)) {
		for i, q := range chain {
			if q.ttl != 0 || !q.bracketed || q.term != first.term {
				return false
			}
			if i > 0 && q.recv.Sub(chain[i-1].sent) > time.Duration(q.granted-1)*time.Second-chaseMargin {
				return false
			}
		}
		return true
	}
	return false
}

// chase runs the chase of key (etcd key k), held by lease since revision rev,
// while kw has Waits and has seen no deletion of the key after rev. It starts at
// first. kw.chasing is set; chase clears it when it returns.
func (l *Locker) chase(kw *keyWatch, k string, lease clientv3.LeaseID, rev int64, first time.Time) {
	defer func() {
		l.mu.Lock()
		kw.chasing = false
		l.mu.Unlock()
	}()
	ctx := kw.ctx
	var c chaseState
	next := first
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
		case <-kw.ended:
			return
		case <-ctx.Done():
			return
		}
		l.mu.Lock()
		done := kw.refs == 0 || kw.lastDel > rev
		l.mu.Unlock()
		if done {
			return
		}
		p, err := l.probeTTL(ctx, lease)
		if err != nil {
			return // the Wait's own bounds (its timer, the watch) still hold
		}
		l.chaseProbes.Add(1)
		expired, at := c.observe(p)
		if expired {
			switch l.confirmExpired(ctx, &c, k, lease) {
			case confirmRevoked, confirmGone:
				return
			case confirmRetry:
				c.reset()
				at = time.Now().Add(chaseStep)
			}
		}
		if at.IsZero() {
			return
		}
		timer.Reset(time.Until(at))
	}
}

// probeTTL asks the leader for lease's remaining time.
func (l *Locker) probeTTL(ctx context.Context, lease clientv3.LeaseID) (ttlProbe, error) {
	sent := time.Now()
	var resp *clientv3.LeaseTimeToLiveResponse
	err := l.call(ctx, func(ctx context.Context) (err error) {
		resp, err = l.client.TimeToLive(ctx, lease)
		return err
	})
	if err != nil {
		return ttlProbe{}, err
	}
	return ttlProbe{sent: sent, recv: time.Now(), ttl: resp.TTL, granted: resp.GrantedTTL,
		member: resp.ResponseHeader.GetMemberId(), term: resp.ResponseHeader.GetRaftTerm()}, nil
}

// Outcomes of confirmExpired.
const (
	confirmRevoked = iota // revoked the lease
	confirmGone           // the key is gone or on another lease: nothing to do
	confirmRetry          // answered at another term: probe again
)

// confirmExpired reads the key k linearizably and revokes lease when the read
// was answered at the term of the probes that showed lease expired (c.term) and
// shows the key still on lease.
func (l *Locker) confirmExpired(ctx context.Context, c *chaseState, k string, lease clientv3.LeaseID) int {
	get, err := l.get(ctx, k)
	if err != nil {
		return confirmGone
	}
	c.saw(get.Header.GetMemberId(), get.Header.GetRaftTerm())
	if get.Header.GetRaftTerm() != c.term {
		return confirmRetry
	}
	if len(get.Kvs) == 0 || clientv3.LeaseID(get.Kvs[0].Lease) != lease {
		return confirmGone
	}
	// Safe to repeat, and in any later term: no holder can extend lease now.
	l.revokeNow(ctx, lease)
	l.chaseRevokes.Add(1)
	return confirmRevoked
}

// startChase starts the chase of key (etcd key k) that Wait's check found held
// (h), unless one runs or the holder has no etcd lease of 2s or more. kw must
// have a Wait (the caller's).
func (l *Locker) startChase(kw *keyWatch, k string, h holderSeen) {
	if h.lease == 0 || h.secs < 2 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shut || kw.chasing || kw.ctx == nil {
		return
	}
	kw.chasing = true
	first := h.at.Add(time.Duration(h.secs)*time.Second - chaseLead)
	l.spawn(func() { l.chase(kw, k, h.lease, h.rev, first) }) // l.mu held, !l.shut
}
