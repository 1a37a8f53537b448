package redlock

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
)

// Defaults and limits of Options.
const (
	// DefaultPrefix is the key namespace when Options.Prefix is empty. It differs
	// from package redislock's, so the two never share keys on one server.
	DefaultPrefix = "redlock"
	// DefaultMaxKeyLen is the longest key, in bytes, when Options.MaxKeyLen is zero.
	DefaultMaxKeyLen = 8 << 10
	// MaxOwnerLen is the longest Options.Owner label, in bytes.
	MaxOwnerLen = 256
	// DefaultNodeTimeout is Options.NodeTimeout when it is zero.
	DefaultNodeTimeout = 200 * time.Millisecond
	// MinNodeTimeout is the smallest per-node timeout a call uses, whatever its ttl.
	MinNodeTimeout = 5 * time.Millisecond
	// DefaultDriftFactor and DefaultDriftConst are Options.DriftFactor and
	// Options.DriftConst when they are zero: the clock-drift allowance of a lease of
	// ttl is ttl*DriftFactor + DriftConst.
	DefaultDriftFactor = 0.01
	DefaultDriftConst  = 2 * time.Millisecond
)

// Options configure a Locker. A nil *Options means the defaults; so does each zero
// field.
type Options struct {
	// Prefix is the namespace of every Redis key and channel the Locker uses on each
	// node (see the package documentation for the layout). It must not contain '{'
	// or '}'. Default DefaultPrefix ("redlock").
	Prefix string
	// Owner is a label stored with every lock this Locker takes; Inspect reports it
	// and ErrLocked errors name it. It is for people, not for the owner check (that
	// uses the Lease's Token). At most MaxOwnerLen bytes. Default "<hostname>:<pid>".
	Owner string
	// MaxKeyLen is the longest key, in bytes, that the Locker accepts; a longer one
	// gives ErrInvalid. It must not be negative. Zero means DefaultMaxKeyLen (8 KiB).
	MaxKeyLen int
	// NodeTimeout caps how long a call waits for any one node. The timeout a call
	// actually uses depends on its ttl:
	//
	//	TryLock, Renew:        max(MinNodeTimeout, min(NodeTimeout, ttl/10))
	//	Unlock, Wait, Inspect: NodeTimeout
	//
	// so a slow or dead node costs an acquisition at most a tenth of its ttl per
	// round trip, and a node that answers later than that is treated as failed. Set
	// it above the round trip to your nodes under load, with a margin. It must not be
	// negative. Zero means DefaultNodeTimeout (200ms).
	NodeTimeout time.Duration
	// DriftFactor and DriftConst make the clock-drift allowance of a lease of ttl:
	// ttl*DriftFactor + DriftConst is subtracted from the lease's validity, for the
	// difference between the rates of the client's and the nodes' clocks.
	// DriftFactor must be in [0, 0.5) and DriftConst must not be negative; zero means
	// the defaults (0.01 and 2ms).
	DriftFactor float64
	DriftConst  time.Duration
}

// withDefaults returns o with its zero fields filled in, or an error wrapping
// distlock.ErrInvalid that names the bad option.
func (o *Options) withDefaults() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Prefix == "" {
		r.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(r.Prefix, "{}") {
		return r, fmt.Errorf("%w: redlock: Options.Prefix %q contains '{' or '}'", distlock.ErrInvalid, r.Prefix)
	}
	if r.Owner == "" {
		r.Owner = distlock.DefaultOwner()
	}
	if len(r.Owner) > MaxOwnerLen {
		return r, fmt.Errorf("%w: redlock: Options.Owner of %d bytes is longer than %d bytes", distlock.ErrInvalid, len(r.Owner), MaxOwnerLen)
	}
	if r.MaxKeyLen < 0 {
		return r, fmt.Errorf("%w: redlock: Options.MaxKeyLen %d is negative", distlock.ErrInvalid, r.MaxKeyLen)
	}
	if r.MaxKeyLen == 0 {
		r.MaxKeyLen = DefaultMaxKeyLen
	}
	if r.NodeTimeout < 0 {
		return r, fmt.Errorf("%w: redlock: Options.NodeTimeout %v is negative", distlock.ErrInvalid, r.NodeTimeout)
	}
	if r.NodeTimeout == 0 {
		r.NodeTimeout = DefaultNodeTimeout
	}
	if math.IsNaN(r.DriftFactor) || r.DriftFactor < 0 || r.DriftFactor >= 0.5 {
		return r, fmt.Errorf("%w: redlock: Options.DriftFactor %v is not in [0, 0.5)", distlock.ErrInvalid, r.DriftFactor)
	}
	if r.DriftFactor == 0 {
		r.DriftFactor = DefaultDriftFactor
	}
	if r.DriftConst < 0 {
		return r, fmt.Errorf("%w: redlock: Options.DriftConst %v is negative", distlock.ErrInvalid, r.DriftConst)
	}
	if r.DriftConst == 0 {
		r.DriftConst = DefaultDriftConst
	}
	return r, nil
}

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
// New returns an error wrapping distlock.ErrInvalid, naming the bad value, when
// clients is empty or holds nil or the same node twice, or when opts is invalid.
func New(clients []redis.UniversalClient, opts *Options) (*Locker, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(clients) == 0 {
		return nil, fmt.Errorf("%w: redlock: no Redis clients (RedLock needs N >= 1 independent masters, best 5)", distlock.ErrInvalid)
	}
	l := &Locker{opts: o, quorum: len(clients)/2 + 1}
	addrs := make(map[string]int)
	for i, c := range clients {
		if c == nil {
			return nil, fmt.Errorf("%w: redlock: client %d of %d is nil", distlock.ErrInvalid, i, len(clients))
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

// phase1 is one node's answer to acquireScript.
type phase1 struct {
	locked  bool
	fence   int64         // the node's fence counter (after the increment when locked)
	owner   string        // the holder's label when not locked
	holdFor time.Duration // the holder's remaining time to live when not locked
}

// testHookAcquire, when set (by tests), runs before phase 1's script is sent to a
// node, with the node's index.
var testHookAcquire atomic.Pointer[func(i int)]

func (l *Locker) acquireOn(ctx context.Context, i int, n names, token string, ms int64) (phase1, error) {
	if hook := testHookAcquire.Load(); hook != nil {
		(*hook)(i)
	}
	v, err := acquireScript.Run(ctx, l.nodes[i].c, []string{n.lock, n.fence}, token, ms, l.opts.Owner).Result()
	if err != nil {
		return phase1{}, err
	}
	switch v := v.(type) {
	case int64:
		if v > 0 {
			return phase1{locked: true, fence: v}, nil
		}
	case []any:
		if len(v) == 3 {
			fence, _ := v[0].(int64)
			owner, _ := v[1].(string)
			pttl, _ := v[2].(int64)
			return phase1{fence: fence, owner: owner, holdFor: time.Duration(pttl) * time.Millisecond}, nil
		}
	}
	return phase1{}, fmt.Errorf("redlock: unexpected reply %#v from the acquire script", v)
}

func (l *Locker) raiseOn(ctx context.Context, i int, n names, token string, fence int64) (bool, error) {
	v, err := raiseScript.Run(ctx, l.nodes[i].c, []string{n.lock, n.fence}, token, fence).Int64()
	return v == 1, err
}

func (l *Locker) releaseOn(ctx context.Context, i int, n names, token string) (bool, error) {
	v, err := unlockScript.Run(ctx, l.nodes[i].c, []string{n.lock}, token, n.channel).Int64()
	return v == 1, err
}

// release removes token's lock from the nodes in idx with a fresh context that
// outlives the caller's (context.WithoutCancel), bounded by cleanupTimeout(ttl). It
// waits for the nodes while ctx is alive, at most wait; the rest finish in the
// background.
func (l *Locker) release(ctx context.Context, idx []int, n names, token string, ttl, wait time.Duration) {
	if len(idx) == 0 {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout(ttl))
		defer cancel()
		fanout(cctx, l, idx, cleanupTimeout(ttl), func(ctx context.Context, i int) (bool, error) {
			return l.releaseOn(ctx, i, n, token)
		}, nil, nil, false)
	}()
	if ctx.Err() != nil || wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-ctx.Done():
	}
}

// TryLock makes one attempt to acquire key for ttl on a quorum of the nodes.
//
// Phase 1 runs a script on every node at once that takes the node's lock if it is
// free (SET NX PX, on the node's clock) and increments the node's fence counter for
// key. Given a quorum of locks, the Lease's Fence is the largest counter among the
// nodes it locked. Where every locked node returned that largest value (the usual
// case) the attempt is done in one round trip; otherwise phase 2 raises the counter
// to the Fence on the nodes that lag, and a quorum of locked nodes must then hold a
// counter at least the Fence before TryLock succeeds. See the package documentation
// for why that makes fences increase across different majorities.
//
// The Lease's Expires is the time taken before phase 1 was sent, plus ttl, minus the
// clock-drift allowance (see Drift); TryLock fails unless Expires is still ahead when
// the quorum is complete. Each node gets NodeTimeout(ttl) per phase: a slow or dead
// node is counted as failed, not waited for.
//
// A failed attempt removes the locks it made (and any it may have made, on nodes
// whose outcome is unknown) on every node, with a fresh context bounded by the ttl
// (at least 1s, at most 5s), never the caller's dead one. It returns an error
// wrapping distlock.ErrLocked, naming the owner that holds the most nodes, when
// other owners hold the key on nodes that answered and keep this attempt from a
// quorum that the answering nodes could otherwise have given. Otherwise (too few
// nodes answered, the quorum took longer than the validity, ctx ended) it returns
// an error that does not wrap ErrLocked and names each failing node.
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	start := time.Now() // before anything else: Expires counts from here
	if err := distlock.ValidateKey(key, l.opts.MaxKeyLen); err != nil {
		return distlock.Lease{}, err
	}
	if err := l.checkTTL(ttl); err != nil {
		return distlock.Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return distlock.Lease{}, fmt.Errorf("redlock: TryLock of key %s: %w", showKey(key), err)
	}
	n := l.names(key)
	token := distlock.NewToken()
	ms := millis(ttl)
	nt := l.NodeTimeout(ttl)
	expires := start.Add(ttl - l.Drift(ttl))

	// Nodes that answer after phase 1 stopped waiting for them (late) join the
	// lease if the attempt succeeded (their counter raised to its fence) and are
	// released if it failed, or if the lease was unlocked meanwhile; those that
	// answer before the outcome is known wait for it in att.
	att := &attempt{}
	settle := func(i int) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout(ttl))
		defer cancel()
		if att.succeeded && !att.unlocked.Load() {
			_, _ = l.raiseOn(cctx, i, n, token, att.fence)
		} else {
			_, _ = l.releaseOn(cctx, i, n, token)
		}
	}
	res := fanout(ctx, l, nil, nt,
		func(ctx context.Context, i int) (phase1, error) { return l.acquireOn(ctx, i, n, token, ms) },
		func(i int, r phase1, err error) {
			if att.lateAnswer(i) {
				if err != nil || r.locked { // else another owner's lock: nothing of ours
					settle(i)
				}
				att.settled(l, token)
			}
		},
		l.decidedAcquire, true)
	defer func() {
		// Settle the late answers that came before the outcome was known (the
		// unanswered ones whose calls failed are released either way).
		for _, i := range att.early {
			go func() {
				settle(i)
				att.settled(l, token)
			}()
		}
	}()
	var locked, held, failed []int
	var fence int64
	for i, r := range res {
		switch {
		case r.err != nil:
			failed = append(failed, i)
		case r.v.locked:
			locked = append(locked, i)
			fence = max(fence, r.v.fence)
		default:
			held = append(held, i)
		}
	}
	fail := func(err error) (distlock.Lease, error) {
		att.decide(l, token, res, false, 0)
		// Wait for the locks that answered (they answer fast); nodes whose outcome is
		// unknown are cleaned up in the background.
		l.release(ctx, locked, n, token, ttl, nt)
		l.release(ctx, failed, n, token, ttl, 0)
		return distlock.Lease{}, err
	}
	if len(locked) < l.quorum {
		return fail(l.noQuorum(ctx, key, res, locked, held))
	}

	// Phase 2: raise the lagging counters. Only locked nodes count towards the
	// quorum; raising the others too keeps the counters in step for later
	// acquisitions.
	ok := 0
	var lagLocked, lagOther []int
	for i, r := range res {
		switch {
		case r.err != nil:
		case r.v.fence >= fence:
			if r.v.locked {
				ok++
			}
		case r.v.locked:
			lagLocked = append(lagLocked, i)
		default:
			lagOther = append(lagOther, i)
		}
	}
	raise := func(ctx context.Context, i int) (bool, error) { return l.raiseOn(ctx, i, n, token, fence) }
	if ok < l.quorum {
		res2 := fanout(ctx, l, append(lagLocked, lagOther...), nt, raise, nil, func(res []reply[bool]) bool {
			more := 0
			for _, i := range lagLocked {
				if r := res[i]; r.answered && r.err == nil && r.v {
					more++
				}
			}
			return ok+more >= l.quorum
		}, false)
		for _, i := range lagLocked {
			if r := res2[i]; r.err == nil && r.v {
				ok++
			}
		}
		if ok < l.quorum {
			errs := nodeErrors(l, res2)
			if ctx.Err() != nil {
				errs = append(errs, ctx.Err())
			}
			return fail(fmt.Errorf("redlock: TryLock of key %s: fence %d recorded on only %d of %d nodes (quorum %d); released: %w",
				showKey(key), fence, ok, len(l.nodes), l.quorum, errors.Join(errs...)))
		}
	} else if lag := append(lagLocked, lagOther...); len(lag) > 0 {
		// Not needed for this lease: raise in the background, bounded.
		go func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout(ttl))
			defer cancel()
			fanout(cctx, l, lag, nt, raise, nil, nil, false)
		}()
	}
	if now := time.Now(); !expires.After(now) {
		return fail(fmt.Errorf("redlock: TryLock of key %s: the quorum took %v, more than ttl %v less the drift allowance %v; released",
			showKey(key), now.Sub(start), ttl, l.Drift(ttl)))
	}
	att.decide(l, token, res, true, fence)
	return distlock.Lease{Key: key, Token: token, Fence: uint64(fence), Expires: expires}, nil
}

// An attempt records the outcome of one TryLock for the nodes that answer phase 1
// after it stopped waiting for them. A successful attempt with such nodes
// outstanding is registered in Locker.late under its token, so that Unlock can tell
// them to release rather than join the lease.
type attempt struct {
	mu          sync.Mutex
	done        bool
	succeeded   bool
	fence       int64
	early       []int // late answers that came before the outcome was known
	outstanding int   // late answers not yet settled (known once done)
	unlocked    atomic.Bool
}

// lateAnswer reports whether node i's late answer is to be settled now (the outcome
// is known); otherwise it records it in a.early, which TryLock settles.
func (a *attempt) lateAnswer(i int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.done {
		a.early = append(a.early, i)
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

// noQuorum builds the error of an attempt that locked fewer than a quorum of nodes.
func (l *Locker) noQuorum(ctx context.Context, key string, res []reply[phase1], locked, held []int) error {
	answered := len(locked) + len(held)
	if len(held) > 0 && answered >= l.quorum && ctx.Err() == nil {
		// The answering nodes could have made a quorum: other owners took it.
		owners := make(map[string]int)
		var holdFor time.Duration
		for _, i := range held {
			owners[res[i].v.owner]++
			holdFor = max(holdFor, res[i].v.holdFor)
		}
		top, most := "", 0
		for o, c := range owners {
			if c > most || (c == most && o < top) {
				top, most = o, c
			}
		}
		return fmt.Errorf("redlock: key %s is held by %q on %d of %d nodes (%d held by others in all, %d answered, quorum %d) for up to %v more: %w",
			showKey(key), top, most, len(l.nodes), len(held), answered, l.quorum, holdFor, distlock.ErrLocked)
	}
	errs := nodeErrors(l, res)
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return fmt.Errorf("redlock: TryLock of key %s: locked %d of %d nodes, %d held by others, %d failed (quorum %d); released: %w",
		showKey(key), len(locked), len(l.nodes), len(held), len(l.nodes)-answered, l.quorum, errors.Join(errs...))
}

// Renew extends lease to ttl from now on every node where its token still owns the
// key (an atomic GET-compare-PEXPIRE script), and returns the new Lease when a quorum
// of nodes extended it; its Expires is the time taken before the request was sent,
// plus ttl, minus the drift allowance. Fence, Key and Token stay the same.
//
// It returns an error wrapping distlock.ErrNotHeld when so many nodes answered that
// the token no longer owns the key that a quorum is out of reach; it then removes the
// token's remaining locks in the background. Any other error (too few nodes
// answered, the round took longer than the validity) leaves the lease's state unknown;
// the old Expires still bounds it. Renew never re-takes a node whose lock is gone: a
// lease that lapsed stays dead.
func (l *Locker) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	start := time.Now() // before anything else: Expires counts from here
	if err := l.checkLease(lease); err != nil {
		return distlock.Lease{}, err
	}
	if err := l.checkTTL(ttl); err != nil {
		return distlock.Lease{}, err
	}
	what := func() string {
		return fmt.Sprintf("redlock: Renew of key %s (fence %d)", showKey(lease.Key), lease.Fence)
	}
	if err := ctx.Err(); err != nil {
		return distlock.Lease{}, fmt.Errorf("%s: %w", what(), err)
	}
	n := l.names(lease.Key)
	ms := millis(ttl)
	expires := start.Add(ttl - l.Drift(ttl))
	res := fanout(ctx, l, nil, l.NodeTimeout(ttl), func(ctx context.Context, i int) (bool, error) {
		v, err := renewScript.Run(ctx, l.nodes[i].c, []string{n.lock}, lease.Token, ms).Int64()
		return v == 1, err
	}, nil, l.decidedBool, true)
	var extended []int
	notHeld := 0
	for i, r := range res {
		switch {
		case r.err != nil:
		case r.v:
			extended = append(extended, i)
		default:
			notHeld++
		}
	}
	if len(extended) >= l.quorum {
		if now := time.Now(); !expires.After(now) {
			return distlock.Lease{}, fmt.Errorf("%s: the quorum took %v, more than ttl %v less the drift allowance %v", what(), now.Sub(start), ttl, l.Drift(ttl))
		}
		lease.Expires = expires
		return lease, nil
	}
	if notHeld > len(l.nodes)-l.quorum {
		l.release(ctx, extended, n, lease.Token, ttl, 0)
		return distlock.Lease{}, fmt.Errorf("%s: held on %d of %d nodes, not on %d (quorum %d): %w",
			what(), len(extended), len(l.nodes), notHeld, l.quorum, distlock.ErrNotHeld)
	}
	errs := nodeErrors(l, res)
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return distlock.Lease{}, fmt.Errorf("%s: extended on %d of %d nodes, not held on %d, %d failed (quorum %d): %w",
		what(), len(extended), len(l.nodes), notHeld, len(l.nodes)-len(extended)-notHeld, l.quorum, errors.Join(errs...))
}

// Unlock releases lease on every node where its token still owns the key (an atomic
// GET-compare-DEL script that publishes the release on the key's channel, which wakes
// Wait). It returns nil when a quorum of nodes released it, and an error wrapping
// distlock.ErrNotHeld when so many nodes answered that it was not held that fewer
// than a quorum can have held it (it may then have removed the token's leftover locks
// on a minority of nodes, which held no lease). Any other error (too few nodes
// answered in time) leaves some locks to expire by their ttl.
//
// Each node gets Options.NodeTimeout. If ctx ends first, Unlock returns ctx's error
// and the requests complete in the background.
func (l *Locker) Unlock(ctx context.Context, lease distlock.Lease) error {
	if err := l.checkLease(lease); err != nil {
		return err
	}
	what := func() string {
		return fmt.Sprintf("redlock: Unlock of key %s (fence %d)", showKey(lease.Key), lease.Fence)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what(), err)
	}
	if a, ok := l.late.Load(lease.Token); ok {
		// A node that grants this lease's lock from now on releases it at once.
		a.(*attempt).unlocked.Store(true)
	}
	n := l.names(lease.Key)
	res := fanout(ctx, l, nil, l.opts.NodeTimeout, func(ctx context.Context, i int) (bool, error) {
		return l.releaseOn(ctx, i, n, lease.Token)
	}, nil, l.decidedBool, true)
	released, notHeld := 0, 0
	for _, r := range res {
		switch {
		case r.err != nil:
		case r.v:
			released++
		default:
			notHeld++
		}
	}
	if released >= l.quorum {
		return nil
	}
	if notHeld > len(l.nodes)-l.quorum {
		return fmt.Errorf("%s: held on %d of %d nodes (quorum %d): %w", what(), released, len(l.nodes), l.quorum, distlock.ErrNotHeld)
	}
	errs := nodeErrors(l, res)
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return fmt.Errorf("%s: released on %d of %d nodes, not held on %d, %d failed (quorum %d): %w",
		what(), released, len(l.nodes), notHeld, len(l.nodes)-released-notHeld, l.quorum, errors.Join(errs...))
}

// decidedAcquire reports whether phase 1's answers so far decide TryLock's result,
// including which error it returns: a quorum locked; or a quorum is out of reach
// and either other owners' locks are what keeps it so among enough answering nodes
// to call it contention (ErrLocked), or so many nodes failed that it cannot be
// contention (another error).
func (l *Locker) decidedAcquire(res []reply[phase1]) bool {
	locked, held, failed, waiting := 0, 0, 0, 0
	for _, r := range res {
		switch {
		case r.failedOrSuspect():
			failed++
		case !r.answered:
			waiting++
		case r.v.locked:
			locked++
		default:
			held++
		}
	}
	q := l.quorum
	return locked >= q || failed > len(l.nodes)-q || (locked+waiting < q && held > 0 && locked+held >= q)
}

// decidedBool reports whether the answers so far of an owner-checked operation on
// every node (true: done on that node, false: not held there) decide its result: a
// quorum said true, or so many said false (not held) or so many failed that a quorum
// is out of reach.
func (l *Locker) decidedBool(res []reply[bool]) bool {
	yes, no, failed := 0, 0, 0
	for _, r := range res {
		switch {
		case r.failedOrSuspect():
			failed++
		case !r.answered:
		case r.v:
			yes++
		default:
			no++
		}
	}
	q := l.quorum
	return yes >= q || no > len(l.nodes)-q || failed > len(l.nodes)-q
}

// decidedView reports whether Inspect's answers so far decide its outcome: one token
// holds a quorum, no token can reach one, or too many nodes failed.
func (l *Locker) decidedView(res []reply[lockView]) bool {
	ok, failed, most := 0, 0, 0
	count := make(map[string]int)
	for _, r := range res {
		switch {
		case r.failedOrSuspect():
			failed++
		case !r.answered:
		default:
			ok++
			if !r.v.free {
				count[r.v.token]++
				most = max(most, count[r.v.token])
			}
		}
	}
	unanswered := len(l.nodes) - ok - failed
	return most >= l.quorum || failed > len(l.nodes)-l.quorum || (ok >= l.quorum && most+unanswered < l.quorum)
}

// lockView is one node's lock as inspectScript reads it.
type lockView struct {
	free         bool
	token, owner string
	fence        uint64
	pttl         time.Duration // -1ns: no time to live
}

// Inspect returns the quorum's view of key: the holder whose token holds the lock on
// a quorum of nodes, with the largest fence any of those nodes records for it, its
// owner label and, as Expires, the time taken before the request was sent plus the
// time until fewer than a quorum of its locks remain (by the nodes' remaining times
// to live, less the drift allowance of that time). It returns an error wrapping
// distlock.ErrNotHeld when no token holds a quorum (the key is free, or an
// acquisition is half-way), and another error when fewer than a quorum of nodes
// answered. Each node gets Options.NodeTimeout.
func (l *Locker) Inspect(ctx context.Context, key string) (distlock.Holder, error) {
	if err := distlock.ValidateKey(key, l.opts.MaxKeyLen); err != nil {
		return distlock.Holder{}, err
	}
	what := func() string { return "redlock: Inspect of key " + showKey(key) }
	if err := ctx.Err(); err != nil {
		return distlock.Holder{}, fmt.Errorf("%s: %w", what(), err)
	}
	n := l.names(key)
	start := time.Now()
	res := fanout(ctx, l, nil, l.opts.NodeTimeout, func(ctx context.Context, i int) (lockView, error) {
		v, err := inspectScript.Run(ctx, l.nodes[i].c, []string{n.lock}).Slice()
		if errors.Is(err, redis.Nil) {
			return lockView{free: true}, nil
		}
		if err != nil {
			return lockView{}, err
		}
		if len(v) != 4 {
			return lockView{}, fmt.Errorf("redlock: unexpected reply %#v from the inspect script", v)
		}
		token, _ := v[0].(string)
		fs, _ := v[1].(string)
		owner, _ := v[2].(string)
		pttl, _ := v[3].(int64)
		fence, _ := strconv.ParseUint(fs, 10, 64)
		d := time.Duration(pttl) * time.Millisecond
		if pttl < 0 {
			d = -1
		}
		return lockView{token: token, owner: owner, fence: fence, pttl: d}, nil
	}, nil, l.decidedView, false)
	answered := 0
	byToken := make(map[string][]lockView)
	for _, r := range res {
		if r.err != nil {
			continue
		}
		answered++
		if !r.v.free && r.v.pttl != 0 {
			byToken[r.v.token] = append(byToken[r.v.token], r.v)
		}
	}
	for _, views := range byToken {
		if len(views) < l.quorum {
			continue
		}
		h := distlock.Holder{Key: key}
		ttls := make([]time.Duration, 0, len(views))
		for _, v := range views {
			if v.fence > h.Fence {
				h.Fence, h.Owner = v.fence, v.owner
			}
			if h.Owner == "" {
				h.Owner = v.owner
			}
			if v.pttl < 0 {
				ttls = append(ttls, time.Duration(math.MaxInt64))
			} else {
				ttls = append(ttls, v.pttl)
			}
		}
		// The quorum dissolves when the quorum-th longest lock expires.
		slices.SortFunc(ttls, func(a, b time.Duration) int { return cmp.Compare(b, a) })
		left := ttls[l.quorum-1]
		if left == time.Duration(math.MaxInt64) {
			left = 0 // no time to live: not one of ours; report no deadline
		} else {
			left -= l.Drift(left)
		}
		if left > 0 {
			h.Expires = start.Add(left)
		}
		return h, nil
	}
	if answered < l.quorum {
		errs := nodeErrors(l, res)
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
		}
		return distlock.Holder{}, fmt.Errorf("%s: only %d of %d nodes answered (quorum %d): %w", what(), answered, len(l.nodes), l.quorum, errors.Join(errs...))
	}
	return distlock.Holder{}, fmt.Errorf("%s: no owner holds it on a quorum of %d of %d nodes: %w", what(), l.quorum, len(l.nodes), distlock.ErrNotHeld)
}
