package redlock

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
)

// A Locker takes leases on keys with the RedLock algorithm over N independent Redis
// masters. It implements distlock.Locker, distlock.Waiter and distlock.Inspector, and
// is safe for concurrent use. Its only resources are the pub/sub connections that
// Wait opens (one per node, shared by all Waits, closed a few seconds after the last
// Wait, by Close, or with the clients); closing the clients is the caller's business.
type Locker struct {
	nodes   []node
	all     []int // 0..N-1
	quorum  int
	opts    Options
	suspect []atomic.Bool // per node: its last call failed (see fanout)
	hubs    []*hub        // per node: the pub/sub connection shared by Waits
	late    sync.Map      // token -> *attempt: leases with late phase-1 answers pending
	state   nodeKeys      // the Redis names of each node's own state (see nodestate.go)
	// quarantineMS is how long, in ms on its own clock, a node that came back empty
	// stays out of quorums: MaxTTL, plus a tenth of it (the longest per-node timeout
	// of an attempt: see nodestate.go), plus its drift allowance.
	quarantineMS int64
}

// A node is one independent Redis master.
type node struct {
	c    redis.UniversalClient
	name string // for messages: "node 2 (127.0.0.1:6379)"
}

var (
	_ distlock.Locker    = (*Locker)(nil)
	_ distlock.Waiter    = (*Locker)(nil)
	_ distlock.Inspector = (*Locker)(nil)
)

// New returns a Locker over the Redis masters that clients reach, one client per
// master. A nil opts means the defaults.
//
// The masters must be independent: no replication between them, no two clients on
// one server (New rejects the same client twice and two *redis.Client with the same
// address, but it cannot see through proxies). Use an odd number of masters: a
// quorum is N/2+1, so N = 4 tolerates one failure, as N = 3 does, at a higher cost;
// even N is allowed but wasteful. N = 1 is allowed and is a single Redis, with none of
// RedLock's tolerance.
//
// Each node must be one standalone master reached by a *redis.Client (or a
// UniversalClient of one server): New rejects a *redis.ClusterClient or *redis.Ring,
// which would spread a node's keys over several servers that fail independently.
//
// New returns an error wrapping distlock.ErrInvalid, naming the bad value, when
// clients is empty or holds nil, the same node twice or a Cluster or Ring client, or
// when opts is invalid.
func New(clients []redis.UniversalClient, opts *Options) (*Locker, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(clients) == 0 {
		return nil, fmt.Errorf("%w: redlock: no Redis clients (RedLock needs N >= 1 independent masters, best 5)", distlock.ErrInvalid)
	}
	l := &Locker{opts: o, quorum: len(clients)/2 + 1}
	l.state = stateKeys(o.Prefix)
	l.quarantineMS = millis(o.MaxTTL + o.MaxTTL/10 + l.Drift(o.MaxTTL))
	addrs := make(map[string]int)
	for i, c := range clients {
		switch c.(type) {
		case nil:
			return nil, fmt.Errorf("%w: redlock: client %d of %d is nil", distlock.ErrInvalid, i, len(clients))
		case *redis.ClusterClient, *redis.Ring:
			return nil, fmt.Errorf("%w: redlock: client %d of %d is a %T: each RedLock node must be one standalone master", distlock.ErrInvalid, i, len(clients), c)
		}
		for j := range i {
			if clients[j] == c {
				return nil, fmt.Errorf("%w: redlock: clients %d and %d are the same client: each node must be counted once", distlock.ErrInvalid, j, i)
			}
		}
		name := fmt.Sprintf("node %d", i)
		if rc, ok := c.(*redis.Client); ok {
			addr := rc.Options().Addr
			if j, dup := addrs[addr]; dup {
				return nil, fmt.Errorf("%w: redlock: clients %d and %d both reach %s: each node must be counted once", distlock.ErrInvalid, j, i, addr)
			}
			addrs[addr] = i
			name = fmt.Sprintf("node %d (%s)", i, addr)
		}
		l.nodes = append(l.nodes, node{c: c, name: name})
		l.all = append(l.all, i)
	}
	l.suspect = make([]atomic.Bool, len(l.nodes))
	for i, n := range l.nodes {
		l.hubs = append(l.hubs, &hub{c: n.c, i: i})
	}
	return l, nil
}

// Close closes the pub/sub connections that Wait opened and waits for their
// goroutines. It does not close the clients, and the Locker stays usable: a later
// Wait opens them again. It returns nil.
func (l *Locker) Close() error {
	for _, h := range l.hubs {
		h.close()
	}
	return nil
}

// Quorum returns how many nodes must agree: N/2+1.
func (l *Locker) Quorum() int { return l.quorum }

// Nodes returns N, the number of Redis masters.
func (l *Locker) Nodes() int { return len(l.nodes) }

// Owner returns the owner label that the Locker stores with its locks.
func (l *Locker) Owner() string { return l.opts.Owner }

// NodeTimeout returns the per-node timeout that TryLock and Renew use for a ttl:
// max(MinNodeTimeout, min(Options.NodeTimeout, ttl/10)).
func (l *Locker) NodeTimeout(ttl time.Duration) time.Duration {
	return max(MinNodeTimeout, min(l.opts.NodeTimeout, ttl/10))
}

// Drift returns the clock-drift allowance of a lease of ttl: ttl*DriftFactor +
// DriftConst, rounded up to a microsecond.
func (l *Locker) Drift(ttl time.Duration) time.Duration {
	d := time.Duration(math.Ceil(float64(ttl)*l.opts.DriftFactor/float64(time.Microsecond))) * time.Microsecond
	return d + l.opts.DriftConst
}

// names are the Redis names of one user key on every node. They share the hash tag
// {<tag>}, so they hash to one Cluster slot where a node is itself a Cluster.
type names struct {
	lock, fence, channel string
}

// names returns "<prefix>:{<tag>}:lock:<key>", "<prefix>:{<tag>}:fence:<key>" and
// "<prefix>:{<tag>}:release:<key>", where <tag> is the first 8 bytes of
// SHA-256(key) in hex. The key follows in full after a fixed-length part, so distinct
// keys (and distinct prefixes) give distinct names.
func (l *Locker) names(key string) names {
	sum := sha256.Sum256([]byte(key))
	var b strings.Builder
	b.Grow(len(l.opts.Prefix) + 20)
	b.WriteString(l.opts.Prefix)
	b.WriteString(":{")
	var tag [16]byte
	hex.Encode(tag[:], sum[:8])
	b.Write(tag[:])
	b.WriteString("}:")
	base := b.String()
	return names{lock: base + "lock:" + key, fence: base + "fence:" + key, channel: base + "release:" + key}
}

func (l *Locker) checkTTL(ttl time.Duration) error {
	if err := distlock.ValidateTTL(ttl); err != nil {
		return err
	}
	if ttl > l.opts.MaxTTL {
		return fmt.Errorf("%w: redlock: ttl %v is longer than Options.MaxTTL %v", distlock.ErrInvalid, ttl, l.opts.MaxTTL)
	}
	if d := l.Drift(ttl); ttl <= d+l.NodeTimeout(ttl) {
		return fmt.Errorf("%w: redlock: ttl %v leaves no validity after the clock-drift allowance %v and one node timeout %v", distlock.ErrInvalid, ttl, d, l.NodeTimeout(ttl))
	}
	return nil
}

func (l *Locker) checkLease(lease distlock.Lease) error {
	if err := distlock.ValidateLease(lease); err != nil {
		return err
	}
	return distlock.ValidateKey(lease.Key, l.opts.MaxKeyLen)
}

// millis returns ttl in whole milliseconds, rounded up: a node must never free the
// key before the client's Expires.
func millis(ttl time.Duration) int64 {
	ms := int64(ttl / time.Millisecond)
	if ttl%time.Millisecond != 0 {
		ms++
	}
	return ms
}

// cleanupTimeout bounds the removal of a half-made lock: it expires by itself after
// ttl, so waiting much longer is pointless; but give a short ttl a fair try.
func cleanupTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl, time.Second), 5*time.Second)
}

// showKey formats key for an error message, shortening a long one.
func showKey(key string) string {
	const max = 64
	if len(key) <= max {
		return strconv.Quote(key)
	}
	return fmt.Sprintf("%q... (%d bytes)", key[:max], len(key))
}

// nodeErrors returns the errors of the replies that have one, each naming its node.
func nodeErrors[T any](l *Locker, res []reply[T]) []error {
	var errs []error
	for i, r := range res {
		if r.ran && r.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l.nodes[i].name, r.err))
		}
	}
	return errs
}
