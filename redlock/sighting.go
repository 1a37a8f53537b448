package redlock

import (
	"slices"
	"time"

	"github.com/distlock/distlock/internal/redisx"
)

// A Wait that follows a TryLock of its Locker which found the key held need not
// read the locks again (a round trip to every node), when the TryLock's view is
// still good: on each node whose lock it saw held, the key's channel was subscribed
// (by an earlier Wait of the Locker, the hub keeps it a while) before the TryLock was
// sent, and no message and no break of the connection came since (redisx Hub's
// Peek, Saw and Check). Held on enough such nodes that every quorum includes one
// (N-quorum+1), the key can become free only by a release there, which the Wait
// hears, or by their locks' expiry, which bounds it.

// peeks are the hubs' states of a key's channel before a TryLock was sent: nil
// when no hub has a subscription.
type peeks struct {
	toks []redisx.Token
	ok   []bool
}

// peek reads each node's hub for channel.
func (l *Locker) peek(channel string) peeks {
	var p peeks
	for i, node := range l.nodes {
		if !node.Hub.Live() {
			continue
		}
		tok, ok := node.Hub.Peek(channel)
		if !ok {
			continue
		}
		if p.toks == nil {
			p.toks, p.ok = make([]redisx.Token, len(l.nodes)), make([]bool, len(l.nodes))
		}
		p.toks[i], p.ok[i] = tok, true
	}
	return p
}

// saw records, on each node of held whose channel p saw subscribed, that the
// TryLock found the key held there.
func (l *Locker) saw(channel string, p peeks, res []reply[phase1], held []int) {
	if p.toks == nil {
		return
	}
	for _, i := range held {
		if p.ok[i] {
			pttl := res[i].v.holdFor
			if pttl < 0 {
				pttl = -1
			}
			// Any message since counts as a release: Unlock's names a turn after
			// the holder's digest ("<digest>|<Locker ID>", turns.go), which the
			// hub's SawHolder would not take for the holder's release.
			l.nodes[i].Hub.Saw(channel, p.toks[i], pttl)
		}
	}
}

// sighted reports whether the hubs' sightings of channel, unchanged since, show the
// key held on enough nodes that no quorum is free without a release there, and
// until when at most that lasts by their times to live.
func (l *Locker) sighted(channel string) (time.Time, bool) {
	var untils []time.Time
	for _, node := range l.nodes {
		until, released, ok := node.Hub.Check(channel)
		if released {
			return time.Time{}, false // a message: maybe a release, read
		}
		if ok {
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
