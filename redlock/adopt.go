package redlock

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A node that came back empty counts again only once it has an era, which is set
// after its quarantine has ended, from the eras of a quorum of the other nodes
// (nodestate.go). Waiting for an unrelated attempt to set it would leave the node
// out for as long as no traffic comes, and a second loss meanwhile would leave too
// few nodes with an era to give either of them one, for good. So a
// Locker that sees a node kept out adopts it itself: it schedules a probe at the
// end of the node's quarantine, which reads every node's state and gives the node
// its era when a quorum of nodes with an era answered; it probes again every
// adoptRetry until the node has an era, has lost its data again (no marker: the
// next attempt that reaches it starts over), or the Locker is closed.

// adoptMargin is how long after its quarantine's end, as the node reported it, a
// node is probed: the client's clock may run a little ahead of the node's.
const adoptMargin = 5 * time.Millisecond

// adoptions are the pending probes of a Locker, one at most per node.
type adoptions struct {
	mu     sync.Mutex
	closed bool
	timers []*time.Timer // per node: the pending probe, or nil
}

// stateScript reads a node's marker ("" when it has none) and the remaining time of
// its quarantine in ms (negative when it has none).
//
// KEYS[1] marker, KEYS[2] quarantine. Returns {marker, pttl}.
var stateScript = redis.NewScript(`
return {redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[2])}
`)

// A probed is one node's state as stateScript read it.
type probed struct {
	epoch  string
	era    int64 // -1: no era (or no marker)
	marked bool  // the node has a marker
	left   time.Duration
}

// adoptRetry is how long a Locker waits between two probes of a node that could not
// be given its era (too few nodes with an era answered): a tenth of MaxTTL, at
// least 10ms.
func (l *Locker) adoptRetry() time.Duration {
	return max(l.opts.MaxTTL/10, 10*time.Millisecond)
}

// adoptLater schedules a probe of node i after d, unless one is pending or the
// Locker is closed. Call it during a call of l or from one of l.group's goroutines.
func (l *Locker) adoptLater(i int, d time.Duration) {
	a := &l.adopts
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed || a.timers[i] != nil {
		return
	}
	l.group.Started()
	a.timers[i] = time.AfterFunc(d, func() { l.adoptRun(i) })
}

// adoptRun probes node i and schedules the next probe when it is needed.
func (l *Locker) adoptRun(i int) {
	defer l.group.Finished()
	var next time.Duration
	if !l.group.Closed() {
		next = l.adopt(i)
	}
	a := &l.adopts
	a.mu.Lock()
	a.timers[i] = nil
	a.mu.Unlock()
	if next > 0 {
		l.adoptLater(i, next)
	}
}

// stopAdoptions cancels the pending probes; a probe already running ends by itself
// (bounded by the node timeouts). Close calls it before it waits for l.group.
func (l *Locker) stopAdoptions() {
	a := &l.adopts
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	for i, t := range a.timers {
		if t != nil && t.Stop() {
			a.timers[i] = nil
			l.group.Finished()
		}
	}
}

// adopt reads every node's state and gives node i its era when its quarantine has
// ended and a quorum of nodes with an era answered. It returns when to probe again
// (0: never). The reads take at most NodeTimeout(MaxTTL), at most a tenth of MaxTTL,
// which the quarantine allows for (nodestate.go).
func (l *Locker) adopt(i int) time.Duration {
	nt := l.NodeTimeout(l.opts.MaxTTL)
	keys := []string{l.state.marker, l.state.quarantine}
	res := fanout(context.Background(), l, nil, nt, func(ctx context.Context, j int) (probed, error) {
		v, err := l.nodes[j].Run(ctx, stateScript, keys).Slice()
		if err != nil {
			return probed{}, err
		}
		return parseProbe(v), nil
	}, nil, nil, false)
	me := res[i]
	switch {
	case me.err != nil:
		return l.adoptRetry()
	case !me.v.marked || me.v.era >= 0:
		return 0 // lost its data again (the next attempt starts over), or adopted
	case me.v.left > 0:
		return me.v.left + adoptMargin
	}
	withEra, era := 0, int64(-1)
	for j, r := range res {
		if j != i && r.err == nil && r.v.era >= 0 {
			withEra++
			era = max(era, r.v.era)
		}
	}
	if withEra < l.quorum || era+1 > maxEra {
		return l.adoptRetry()
	}
	ctx, cancel := context.WithTimeout(context.Background(), nt)
	defer cancel()
	if ok, err := l.assignEra(ctx, i, me.v.epoch, era+1, false); err != nil || !ok {
		return l.adoptRetry() // the next probe sees why
	}
	return 0
}

// parseProbe reads stateScript's reply.
func parseProbe(v []any) probed {
	p := probed{era: -1}
	if len(v) != 2 {
		return p
	}
	m, _ := v[0].(string)
	ms, _ := v[1].(int64)
	p.left = time.Duration(ms) * time.Millisecond
	epoch, era, found := strings.Cut(m, "|")
	if m == "" {
		return p
	}
	p.marked, p.epoch = true, epoch
	if e, err := strconv.ParseInt(era, 10, 64); found && err == nil {
		p.era = e
	}
	return p
}

// assignEra runs assignScript on node i: it gives the node era when its marker's
// epoch is still epoch and its quarantine has ended, or at once when lift is set
// (a new deployment). It reports whether it set the era.
func (l *Locker) assignEra(ctx context.Context, i int, epoch string, era int64, lift bool) (bool, error) {
	flag := "0"
	if lift {
		flag = "1"
	}
	v, err := l.nodes[i].Run(ctx, assignScript, []string{l.state.marker, l.state.quarantine}, epoch, strconv.FormatInt(era, 10), flag).Int64()
	return v == 1, err
}
