package redlock

import (
	"slices"
	"time"

	"github.com/distlock/distlock/internal/redisx"
)

// A Wait that follows a TryLock of its Locker which found the key held need not
// read the locks again (a round trip to every node), when the TryLock's view is
// still good: on each node whose lock it saw held, the key's channel and the
// Locker's turn channel of the key (a release that names the Locker goes there
// only: turns.go) were subscribed (by an earlier Wait of the Locker, the hub keeps
// them a while) before the TryLock was sent, and no message on either and no break
// of the connection came since (redisx Hub's Peek, Saw and Check). Held on enough such nodes that every quorum includes one
// (N-quorum+1), the key can become free only by a release there, which the Wait
// hears, or by their locks' expiry, which bounds it.

// peeks are the hubs' states of a key's channel and of the Locker's turn channel
// of the key before a TryLock was sent: toks nil when no hub has a subscription
// to the key's channel; ok[i] when node i's hub has both.
type peeks struct {
	toks, turnToks []redisx.Token
	ok             []bool
}

// peek reads each node's hub for the channels of key's names n.
func (l *Locker) peek(n redisx.Names) peeks {
	var p peeks
	var tc string // built only when a hub has the key's channel: not on W1's path
	for i, node := range l.nodes {
		if !node.Hub.Live() {
			continue
		}
		tok, ok := node.Hub.Peek(n.Channel)
		if !ok {
			continue
		}
		if p.toks == nil {
			p.toks, p.turnToks, p.ok = make([]redisx.Token, len(l.nodes)), make([]redisx.Token, len(l.nodes)), make([]bool, len(l.nodes))
			tc = turnChannel(n, l.id)
		}
		p.toks[i] = tok
		p.turnToks[i], p.ok[i] = node.Hub.Peek(tc)
	}
	return p
}

// saw records, on each node of held whose channels p saw subscribed, that the
// TryLock found the key held there.
func (l *Locker) saw(n redisx.Names, p peeks, res []reply[phase1], held []int) {
	if p.toks == nil {
		return
	}
	tc := turnChannel(n, l.id)
	for _, i := range held {
		if p.ok[i] {
			pttl := res[i].v.holdFor
			if pttl < 0 {
				pttl = -1
			}
			// Any message since counts as a release: Unlock's names a turn after
			// the holder's digest ("<digest>|<Locker ID>", turns.go), which the
			// hub's SawHolder would not take for the holder's release.
			l.nodes[i].Hub.Saw(n.Channel, p.toks[i], pttl)
			l.nodes[i].Hub.Saw(tc, p.turnToks[i], pttl)
		}
	}
}

// sighted reports whether the hubs' sightings of the channels of key's names n,
// unchanged since, show the key held on enough nodes that no quorum is free
// without a release there, and until when at most that lasts by their times to
// live.
func (l *Locker) sighted(n redisx.Names) (time.Time, bool) {
	var untils []time.Time
	tc := turnChannel(n, l.id)
	for _, node := range l.nodes {
		until, released, ok := node.Hub.Check(n.Channel)
		_, turnReleased, turnOK := node.Hub.Check(tc)
		if released || turnReleased {
			return time.Time{}, false // a message: maybe a release, read
		}
		if ok && turnOK {
			untils = append(untils, until)
		}
	}
	spare := len(l.nodes) - l.quorum // held nodes that may expire before a quorum is free
	if len(untils) <= spare {
		return time.Time{}, false
	}
	// A quorum can be free once all but spare of the sighted locks expired.
	slices.SortFunc(untils, time.Time.Compare)
	return untils[len(untils)-spare-1], true
}
