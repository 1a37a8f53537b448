package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
// before eras). Once the quarantine of a node that has no era yet has ended, a probe
// of the Locker that found it kept out (adopt.go) gives it 1 + the largest era among
// the other nodes with an era that answered, when they are at least a quorum; the
// raise script lifts a node's era to the era part of any fence it records. So the
// era of a node that came back empty is above the era part of every fence issued
// before it lost its data, and every counter it creates, and every fence read from
// it, is larger than those fences (see "Masters that lose their data" in the
// package documentation for the argument).
//
// A fresh deployment has no markers at all. When every one of the N nodes answers an
// attempt, none of them counts, and none carries the tag of a node found empty while
// other nodes had an era (runningTag), no node has held anything since its marker
// was written, and nothing before unless every node lost its data, which no RedLock
// survives: the attempt gives all of them the first era (0, or above
// Options.FenceFloor), lifts their quarantine, and tries once more. A tagged marker
// means a deployment that ran and lost too many nodes' data: the attempt fails with
// errLostMajority. A deployment that starts with a node down waits until it is up.

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
	token string        // the attempt's token (the epoch of a marker it wrote)
	epoch string        // the marker's epoch
	left  time.Duration // the quarantine's remaining time; <= 0 when it has ended
}

func (s nodeState) String() string {
	if s.left > 0 {
		return fmt.Sprintf("lost its data (restarted empty, or new): kept out of quorums for %v more", s.left.Round(time.Millisecond))
	}
	return "came back empty and waits for its fence era (a quorum of nodes with eras must answer)"
}

// settleNodes acts on the nodes that phase 1 found kept out (res[i].v.out). When
// bootstrap is set and every node answered and none counts, the nodes are a new
// deployment if one attempt found them all empty (they all carry its epoch: see
// newDeployment); it then brings them all in and reports true, so that the attempt
// is made again, and otherwise it returns errLostMajority. In every other case it
// schedules the adoption of each node kept out at the end of its quarantine
// (adopt.go).
func (l *Locker) settleNodes(ctx context.Context, res []reply[phase1], bootstrap bool) (bool, error) {
	var out []int
	for i, r := range res {
		if r.err == nil && r.v.out != nil {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		return false, nil
	}
	if !bootstrap || len(out) < len(l.nodes) {
		running := len(out) < len(l.nodes) && slices.ContainsFunc(res, func(r reply[phase1]) bool { return r.err == nil && r.v.out == nil })
		for _, i := range out {
			if running && res[i].v.out.epoch == res[i].v.out.token {
				l.tagLater(ctx, i, res[i].v.out.token)
			}
			l.adoptLater(i, max(res[i].v.out.left, 0))
		}
		return false, nil
	}
	if !newDeployment(res) {
		return false, errLostMajority
	}
	ok := 0
	for _, r := range fanout(ctx, l, out, l.opts.NodeTimeout, func(ctx context.Context, i int) (bool, error) {
		return l.assignEra(ctx, i, res[i].v.out.epoch, l.firstEra, true)
	}, nil, nil, false) {
		if r.err == nil && r.v {
			ok++
		}
	}
	return ok > 0, nil
}

// newDeployment reports whether the nodes of res, every one of which answered and
// none of which counts, are a new deployment: none of them was found empty while
// another node had an era (an attempt that finds a node empty while others count
// tags its marker: tagScript). Otherwise some node came back empty in a deployment
// that was running, and the fences it issued are known to nobody that answered.
func newDeployment(res []reply[phase1]) bool {
	for _, r := range res {
		if strings.HasSuffix(r.v.out.epoch, runningTag) {
			return false
		}
	}
	return true
}

// runningTag ends the epoch of a node that an attempt found empty while other nodes
// had an era: that node lost its data in a running deployment (tagScript).
const runningTag = "+"

// tagScript renames the epoch ARGV[1] of a node's marker (without era) to
// ARGV[1] + runningTag. KEYS[1] marker. Returns 1 when it did.
var tagScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] .. '|' then return 0 end
redis.call('SET', KEYS[1], ARGV[1] .. '+|')
return 1
`)

// tagLater tags node i, whose marker the attempt of token wrote, as lost in a
// running deployment, in the background.
func (l *Locker) tagLater(ctx context.Context, i int, token string) {
	l.group.Go(func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opts.CleanupTimeout)
		defer cancel()
		_ = l.nodes[i].Run(cctx, tagScript, []string{l.state.marker}, token).Err()
	})
}

// errLostMajority is the error of an attempt that found every node without an era
// and markers left by earlier losses (see newDeployment).
var errLostMajority = errors.New("every node lost its data or waits for its fence era, and some were found empty while other nodes had eras: " +
	"more nodes lost their data than a quorum can give eras to, so the fences issued so far are unknown; " +
	"an operator must start the deployment again (see \"Masters that lose their data\" in the redlock documentation)")
