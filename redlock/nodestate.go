package redlock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A node that loses its data (restarted without persistence, its files lost, or
// flushed) forgets the locks it held and its fence counters. Counted at once, it
// could complete a second quorum for a key that is still held, and hand out a fence
// that was issued before. Every node therefore keeps a state of its own, beside the
// locks:
//
//	P:node        "<epoch>|<era>": the node's marker, without expiry. The epoch is the
//	              token of the attempt that found the node empty; the era (a
//	              number) is set later, and is empty until then.
//	P:quarantine  present, with a time to live, while the node is kept out
//
// A node whose marker is missing lost its data (or is new): the acquire script then
// writes a marker with no era and a quarantine of MaxTTL plus a tenth of it plus its
// drift allowance (on that node's clock), and refuses the lock. (The tenth is the
// longest per-node timeout of an attempt with a ttl up to MaxTTL: the replies from
// which an era is computed may have been read that much before the node's own reply
// said that its quarantine had ended.) A node counts towards a quorum only
// once it has an era and no quarantine. So every lock it forgot has expired on the
// other nodes, and the lease that held it has passed its Expires, before it counts
// again: a lease's locks never live longer than MaxTTL, and its Expires comes
// before they end.
//
// Fences: a counter that a node creates starts at era * 2^40 (era 0: at 0, as
// before eras). An attempt that finds a node whose quarantine has ended but that has
// no era yet gives it 1 + the largest era among the nodes with an era that answered
// it, when they are at least a quorum; the raise script lifts a node's era to the
// era part of any fence it records. So the era of a node that came back empty is
// above the era part of every fence issued before it lost its data, and every
// counter it creates, and every fence read from it, is larger than those fences
// (see "Fences after data loss" in the package documentation for the argument).
//
// A fresh deployment has no markers at all. When every one of the N nodes answers an
// attempt and none of them counts (all new, or all kept out), no quorum can have
// held anything that survives, unless a majority lost its data, which no RedLock
// survives: the attempt gives all of them era 0 (or 1 + the largest era seen),
// lifts their quarantine, and tries once more. A deployment that starts with a node
// down waits for the quarantine instead.

// eraUnit is 2^40: the fences of era e start above e * eraUnit. Lua's numbers are
// doubles, exact up to 2^53, so eras stay below maxEra.
const (
	eraUnit = 1 << 40
	maxEra  = 1<<13 - 1
)

// nodeKeys are the Redis names of a node's own state.
type nodeKeys struct {
	marker, quarantine string
}

// stateKeys returns the Redis names of a node's state for prefix: "<prefix>:node"
// and "<prefix>:quarantine". They have no hash tag: a node is one standalone server.
func stateKeys(prefix string) nodeKeys {
	return nodeKeys{marker: prefix + ":node", quarantine: prefix + ":quarantine"}
}

// assignScript gives a node that has no era the era ARGV[2], and, when ARGV[3] is
// "1" (a fresh deployment), ends its quarantine; otherwise it acts only once the
// quarantine has ended. It acts only while the node's marker is still the one the
// attempt saw, "<ARGV[1]>|": a node that lost its data again since keeps its new
// marker.
//
// KEYS[1] marker, KEYS[2] quarantine; ARGV[1] epoch, ARGV[2] era, ARGV[3] "1" or "0".
// Returns 1 when it set the era, 0 otherwise.
var assignScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] .. '|' then return 0 end
if ARGV[3] ~= '1' and redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. ARGV[2])
redis.call('DEL', KEYS[2])
return 1
`)

// A nodeState is what phase 1 learned of a node that does not count: it came back
// empty (or is new) and is kept out, or waits for its era.
type nodeState struct {
	epoch string        // the marker's epoch
	left  time.Duration // the quarantine's remaining time; <= 0 when it has ended
}

func (s nodeState) String() string {
	if s.left > 0 {
		return fmt.Sprintf("lost its data (restarted empty, or new): kept out of quorums for %v more", s.left.Round(time.Millisecond))
	}
	return "came back empty and waits for its fence era (a quorum of nodes with eras must answer)"
}

// settleNodes acts on the nodes that phase 1 found kept out (res[i].v.out): when
// every node answered and none counts, it brings them all in (a fresh deployment)
// and reports true, so that the attempt is made again; otherwise it gives an era to
// those whose quarantine has ended, when a quorum of nodes with an era answered, in
// the background.
func (l *Locker) settleNodes(ctx context.Context, res []reply[phase1], bootstrap bool) bool {
	var out []int
	withEra, era := 0, int64(-1)
	for i, r := range res {
		switch {
		case r.err != nil:
		case r.v.out != nil:
			out = append(out, i)
		default:
			withEra++
			era = max(era, r.v.era)
		}
	}
	if len(out) == 0 {
		return false
	}
	next := strconv.FormatInt(era+1, 10)
	if era+1 > maxEra {
		return false // out of eras: the nodes stay out (see the package documentation)
	}
	assign := func(ctx context.Context, idx []int, lift string) []reply[bool] {
		return fanout(ctx, l, idx, l.opts.NodeTimeout, func(ctx context.Context, i int) (bool, error) {
			v, err := l.nodes[i].Run(ctx, assignScript, []string{l.state.marker, l.state.quarantine}, res[i].v.out.epoch, next, lift).Int64()
			return v == 1, err
		}, nil, nil, false)
	}
	if bootstrap && len(out) == len(l.nodes) {
		ok := 0
		for _, r := range assign(ctx, out, "1") {
			if r.err == nil && r.v {
				ok++
			}
		}
		return ok > 0
	}
	var ended []int
	for _, i := range out {
		if res[i].v.out.left <= 0 {
			ended = append(ended, i)
		}
	}
	if len(ended) > 0 && withEra >= l.quorum {
		l.group.Go(func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opts.NodeTimeout)
			defer cancel()
			assign(cctx, ended, "0")
		})
	}
	return false
}
