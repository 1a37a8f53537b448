package redlock

import (
	"cmp"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/redisx"
	"github.com/distlock/distlock/internal/waitq"
)

// backend is the Backend of the Locker's errors.
const backend = "redlock"

// A Locker takes leases on keys with the RedLock algorithm over N independent Redis
// masters: a fan-out of one internal/redisx Node per master (its scripts and the
// pub/sub hub of its Waits) plus the quorum logic. It implements distlock.Locker,
// distlock.Waiter and distlock.Inspector, and is safe for concurrent use. Make it
// with New; Close it when done (Close never closes the clients).
type Locker struct {
	nodes   []*redisx.Node
	all     []int // 0..N-1
	quorum  int
	opts    Options
	suspect []atomic.Bool // per node: its last call failed (see fanout)
	late    sync.Map      // token -> *attempt: leases with late phase-1 answers pending
	state   nodeKeys      // the Redis names of each node's own state (see nodestate.go)
	// quarantineMS is how long, in ms on its own clock, a node that came back empty
	// stays out of quorums: MaxTTL, plus a tenth of it (the longest per-node timeout
	// of an attempt: see nodestate.go), plus its drift allowance.
	quarantineMS int64
	// firstEra is the era a new deployment starts in: 0, or above Options.FenceFloor.
	firstEra    int64
	adopts      adoptions     // the pending adoptions of nodes that came back empty (adopt.go)
	group       *redisx.Group // calls and their goroutines, for Close
	queue       *waitq.Queue  // the Waits' lines, by key (herd.go)
	views       views         // what the Locker knows of each waited key's holders
	readers     readers       // which Wait of each key reads its messages (readers.go)
	flights     flights       // one attempt per key in flight (flight.go)
	renewals    renewals      // the Renews that wait for the next batch (renewbatch.go)
	id          string        // the Locker's ID in the keys' turns (turns.go)
	idArg       any           // id, as a script argument (converted once)
	turnTimeout time.Duration // see defaultTurnTimeout
	heard       heardRing     // the digests of the last releases its Waits took (passTurn)
	// hookAcquire, when set (by tests, export_test.go), runs before phase 1's script
	// is sent to a node, with the node's index.
	hookAcquire atomic.Pointer[func(i int)]
	// hookRelease, when set (by tests), runs before a release script is sent to a
	// node, with the node's index.
	hookRelease atomic.Pointer[func(i int)]
}

var (
	_ distlock.Locker    = (*Locker)(nil)
	_ distlock.Waiter    = (*Locker)(nil)
	_ distlock.Inspector = (*Locker)(nil)
)

// New returns a Locker over the Redis masters that clients reach, one client per
// master; the caller keeps the clients and closes them (after the Locker's Close).
// A nil opts means the defaults. New does no I/O (see CheckServer).
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
// New returns an *distlock.OpError wrapping distlock.ErrInvalid, naming the bad
// value, when clients is empty or holds nil, the same node twice or a Cluster or Ring
// client, or when opts is invalid.
func New(clients []redis.UniversalClient, opts *Options) (*Locker, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, opError("New", "", err)
	}
	if len(clients) == 0 {
		return nil, opError("New", "", fmt.Errorf("%w: no Redis clients (RedLock needs N >= 1 independent masters, best 5)", distlock.ErrInvalid))
	}
	l := &Locker{opts: o, quorum: len(clients)/2 + 1, group: redisx.NewGroup(), queue: waitq.New(0), id: driver.NewToken()[:16]}
	l.state = stateKeys(o.Prefix)
	l.turnTimeout = cmp.Or(o.turnTimeout, defaultTurnTimeout)
	l.idArg = l.id
	l.quarantineMS = redisx.Millis(o.MaxTTL + o.MaxTTL/10 + l.drift(o.MaxTTL))
	hub := o.hub
	hub.Unheard = l.passTurn // turns.go
	addrs := make(map[string]int)
	for i, c := range clients {
		if err := checkClient(clients, i, addrs); err != nil {
			return nil, opError("New", "", err)
		}
		name := fmt.Sprintf("node %d", i)
		if rc, ok := c.(*redis.Client); ok {
			name = fmt.Sprintf("node %d (%s)", i, rc.Options().Addr)
		}
		node := redisx.NewNode(c, i, name, o.NodeTimeout, hub)
		l.nodes = append(l.nodes, node)
		l.all = append(l.all, i)
	}
	l.suspect = make([]atomic.Bool, len(l.nodes))
	l.adopts.timers = make([]*time.Timer, len(l.nodes))
	if o.FenceFloor > 0 {
		l.firstEra = int64(o.FenceFloor/eraUnit) + 1
	}
	return l, nil
}

// checkClient returns an error wrapping distlock.ErrInvalid when clients[i] is nil,
// a Cluster or Ring client, or the same node as an earlier client; addrs maps the
// addresses of the earlier *redis.Client to their index.
func checkClient(clients []redis.UniversalClient, i int, addrs map[string]int) error {
	c := clients[i]
	switch c.(type) {
	case nil:
		return fmt.Errorf("%w: client %d of %d is nil", distlock.ErrInvalid, i, len(clients))
	case *redis.ClusterClient, *redis.Ring:
		return fmt.Errorf("%w: client %d of %d is a %T: each RedLock node must be one standalone master", distlock.ErrInvalid, i, len(clients), c)
	}
	for j := range i {
		if clients[j] == c {
			return fmt.Errorf("%w: clients %d and %d are the same client: each node must be counted once", distlock.ErrInvalid, j, i)
		}
	}
	if rc, ok := c.(*redis.Client); ok {
		addr := rc.Options().Addr
		if j, dup := addrs[addr]; dup {
			return fmt.Errorf("%w: clients %d and %d both reach %s: each node must be counted once", distlock.ErrInvalid, j, i, addr)
		}
		addrs[addr] = i
	}
	return nil
}

// Close stops the Locker's background work and waits for it: the pub/sub connection
// of each node is closed (Waits in progress return an error wrapping
// distlock.ErrClosed), and Close waits for the calls in progress and for the work
// they left running on the nodes (late answers, clean-ups, raises: each bounded by
// the node timeouts and Options.CleanupTimeout). It does not close the clients, and it
// does not release held leases: each stays held until its Unlock (before Close) or
// its ttl. Every call after Close returns an *distlock.OpError wrapping
// distlock.ErrClosed. Close is idempotent; it returns nil.
func (l *Locker) Close() error {
	if l.group.Close() {
		l.stopAdoptions()
		l.queue.Close()
		for _, n := range l.nodes {
			n.Hub.Close()
		}
	}
	l.group.Wait()
	return nil
}

// Owner returns the owner label that the Locker stores with its locks.
func (l *Locker) Owner() string { return l.opts.Owner }

// NodeTimeout returns the per-node timeout that TryLock and Renew use for a ttl:
// max(MinNodeTimeout, min(Options.NodeTimeout, ttl/10)).
func (l *Locker) NodeTimeout(ttl time.Duration) time.Duration {
	return max(MinNodeTimeout, min(l.opts.NodeTimeout, ttl/10))
}

// drift returns the clock-drift allowance of a lease of ttl: ttl*DriftFactor +
// DriftConst, rounded up to a microsecond.
func (l *Locker) drift(ttl time.Duration) time.Duration {
	d := time.Duration(math.Ceil(float64(ttl)*l.opts.DriftFactor/float64(time.Microsecond))) * time.Microsecond
	return d + l.opts.DriftConst
}

// names returns the Redis names of key on every node (see "Keys on each master" in
// the package documentation).
func (l *Locker) names(key string) redisx.Names { return redisx.KeyNames(l.opts.Prefix, key) }

func (l *Locker) checkTTL(ttl time.Duration) error {
	if err := driver.ValidateTTL(ttl); err != nil {
		return err
	}
	if ttl > l.opts.MaxTTL {
		return fmt.Errorf("%w: ttl %v is longer than Options.MaxTTL %v", distlock.ErrInvalid, ttl, l.opts.MaxTTL)
	}
	if d := l.drift(ttl); ttl <= d+l.NodeTimeout(ttl) {
		return fmt.Errorf("%w: ttl %v leaves no validity after the clock-drift allowance %v and one node timeout %v", distlock.ErrInvalid, ttl, d, l.NodeTimeout(ttl))
	}
	return nil
}

func checkLease(lease distlock.Lease) error {
	if err := driver.ValidateLease(lease); err != nil {
		return err
	}
	return driver.ValidateKey(lease.Key, MaxKeyLen)
}

// opError is the error of op on key.
func opError(op, key string, err error) error {
	return &distlock.OpError{Backend: backend, Op: op, Key: key, Err: err}
}

// nodeErrors returns the errors of the replies that have one, each naming its node.
func nodeErrors[T any](l *Locker, res []reply[T]) []error {
	var errs []error
	for i, r := range res {
		if r.ran && r.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l.nodes[i].Name, r.err))
		}
	}
	return errs
}
