package zklock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// backend is the Backend of every *distlock.OpError this package returns.
const backend = "zklock"

// maxCreates bounds the creates of one TryLock that find the key's node missing (it
// raced with ZooKeeper's removal of the empty container).
const maxCreates = 5

// A Locker takes leases on keys as ephemeral-sequential nodes of one ZooKeeper
// session (a Session). It implements distlock.Locker, distlock.Waiter,
// distlock.Inspector, distlock.LossNotifier and distlock.LossWatcher, and is safe
// for concurrent use.
//
// TryLock, Renew, Unlock and Inspect are driver.Locker's (the core's) over ops, the
// Locker's driver.Driver: the core validates, counts Expires from before the
// request, refuses late replies, retries and wraps the errors; ops makes one
// attempt of each. go-zookeeper's requests take no context, so ops runs them in
// goroutines of the Locker and returns when the call's context ends; those
// goroutines, the removals of nodes that a cancelled or failed call left behind, the
// loss monitor and the senders of Renew's checks are the Locker's own, outside the
// core's Calls, so that Close never waits for a request that go-zookeeper cannot
// cancel. The removals of nodes run until each node is gone or the Session's
// connection is closed (see Close).
type Locker struct {
	sess *Session
	conn *zk.Conn
	o    Options
	data []byte // the lock nodes' data: Owner

	core   *driver.Locker                 // over ops
	calls  *driver.Calls                  // core's: the lifecycle of Waits
	checks *driver.Batcher[string, error] // Renew's checks, by node path

	prefixReady atomic.Bool      // Prefix's components exist (as far as we know)
	crowded     [256]atomic.Bool // hints by key path: see crowd

	mu         sync.Mutex
	closed     bool
	done       chan struct{}             // closed by Close: waits and the monitor stop
	wg         sync.WaitGroup            // the Locker's goroutines (tests wait for them)
	held       map[string]*heldLease     // leases that TryLock returned and that may still be held, by Token
	grants     map[string]grant          // leases that Acquire won, by the core's token, until TryLock returns them
	subs       map[string]*sub           // Lost subscriptions, by Token
	dead       map[string]struct{}       // Tokens declared lost (or being unlocked) whose node is being removed
	flights    map[string]*renewFlight   // Renews waiting for the server, by Token
	pending    map[string][]*pendingWait // waiter nodes for TryLock to claim, by key path
	monitoring bool                      // the monitor goroutine runs

	// renewHook, when not nil, runs in Renew after the server confirmed the lease
	// and before Renew's answer is settled: tests put a loss of the lease there.
	renewHook func(distlock.Lease)
}

// A heldLease is a lease that this Locker's TryLock returned and that no Unlock,
// Renew or loss has found released yet: Close deletes its node once its Expires has
// passed.
type heldLease struct {
	key     string        // the lease's Key: with its Token, it names the node (nodeOf)
	session int64         // the node's owner
	fence   uint64        // the node's czxid: the lease's Fence
	least   time.Duration // the smallest session timeout granted when Expires was last set
	expires time.Time     // the latest Expires that TryLock or Renew returned
}

// A grant is a lease that an Acquire won, until TryLock returns it (claimGrant).
type grant struct {
	h     *heldLease
	token string // the lease's Token: <id>-<sequence>
	// capped, when not zero, caps the lease's Expires: a lease taken over from a
	// Wait's lock node counts from before that node's create.
	capped time.Time
}

var (
	_ distlock.Locker       = (*Locker)(nil)
	_ distlock.Waiter       = (*Locker)(nil)
	_ distlock.Inspector    = (*Locker)(nil)
	_ distlock.LossNotifier = (*Locker)(nil)
	_ distlock.LossWatcher  = (*Locker)(nil)
)

// New returns a Locker that takes its leases in s's session, whose granted session
// timeout bounds every lease's Expires (see "How long a lease is held" in the package
// doc). A nil opts means all defaults. It returns an *distlock.OpError (Op "New")
// wrapping distlock.ErrInvalid, naming the bad value, when s is nil or an option is
// invalid. New does no I/O.
//
// New does not take over s: the caller closes it, after (or instead of) the Locker's
// Close.
func New(s *Session, opts *Options) (*Locker, error) {
	fail := func(err error) (*Locker, error) {
		return nil, &distlock.OpError{Backend: backend, Op: "New", Err: err}
	}
	if s == nil || s.conn == nil {
		return fail(fmt.Errorf("%w: nil *zklock.Session (make one with zklock.Connect)", distlock.ErrInvalid))
	}
	least, _ := s.bounds()
	o, err := opts.withDefaults(least)
	if err != nil {
		return fail(err)
	}
	l := &Locker{
		sess:    s,
		conn:    s.conn,
		o:       o,
		data:    []byte(o.Owner),
		done:    make(chan struct{}),
		held:    make(map[string]*heldLease),
		grants:  make(map[string]grant),
		subs:    make(map[string]*sub),
		dead:    make(map[string]struct{}),
		flights: make(map[string]*renewFlight),
		pending: make(map[string][]*pendingWait),
	}
	l.core, err = driver.NewLocker((*ops)(l), driver.Config{
		Backend:   backend,
		MaxKeyLen: MaxKeyLen,
		// Expires = start + min(ttl, the validity): see validity.
		Drift: func(ttl time.Duration) time.Duration {
			v, _ := l.validity(ttl)
			return ttl - v
		},
	})
	if err != nil {
		return nil, err
	}
	l.calls = l.core.Calls()
	l.checks = newChecks(l, false)
	return l, nil
}

// Close closes the Locker:
//
//   - Calls in flight (TryLock, Renew, Unlock, Inspect, Wait) return at once with an
//     error wrapping distlock.ErrClosed, unless they were done; every later call
//     returns one. A TryLock cut short this way releases what its attempt takes,
//     in the background; an Unlock cut short deletes its node in the background.
//   - Every Lost channel closes, and the AfterLost functions run: the Locker no
//     longer watches the session.
//   - Held leases are not released at once: each stays held until its Expires, as
//     if its holder had crashed (Unlock leases before Close to free them at once).
//     Then, since a ZooKeeper lock has no ttl and the Session lives on, the Locker
//     deletes the lease's node, in the background. The waiter nodes of its Waits
//     are deleted at once.
//
// The deletions retry until each node is gone or its session has ended, for as long
// as the Session's connection is open: a quorum loss longer than the session
// timeout delays them, it does not end them (a new leader gives every session a
// full timeout). Closing the Session frees every key of its session at once, and
// ends them. Close itself returns at once, without waiting for the server. It does
// not close the Session. A second Close waits for the first and returns nil.
func (l *Locker) Close() error { return l.core.Close() }

// TryLock makes one attempt to acquire key: it creates a protected
// ephemeral-sequential node under the key's node and holds the lock when that node
// has the lowest sequence number among the key's lock nodes; otherwise it deletes
// its node and returns an error wrapping distlock.ErrLocked. The lease's Fence is
// the node's czxid; its Expires is the request's start + min(ttl, 2/3 S -
// TickTime/2), S the granted session timeout (see "How long a lease is held" in
// the package doc). Its Token is <id>-<sequence>: it names the node.
//
// When ctx ends first (or Close runs), TryLock returns ctx's error (or ErrClosed)
// at once and the attempt finishes in the background, which deletes the node if it
// was created. A node whose create lost its reply (the connection broke) is found
// again by its protected id: it is used, or deleted, never left behind. Errors are
// *distlock.OpError.
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	lease, err := l.core.TryLock(ctx, key, ttl)
	if err != nil {
		return lease, err
	}
	return l.claimGrant(lease), nil
}

// claimGrant returns the lease that the core made of a won Acquire with its zklock
// Token (the core's token is the protected id, the Token also names the node's
// sequence number) and, for a lease taken over from a Wait's lock node, the Expires
// counted from before that node's create; and records the Expires.
func (l *Locker) claimGrant(lease distlock.Lease) distlock.Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	g, ok := l.grants[lease.Token]
	delete(l.grants, lease.Token)
	if !ok {
		return lease // cannot happen: Acquire granted it
	}
	lease.Token = g.token
	if !g.capped.IsZero() && g.capped.Before(lease.Expires) {
		lease.Expires = g.capped
	}
	g.h.expires = lease.Expires
	return lease
}

// Renew checks, through the leader, that the lease's lock node still exists and
// belongs to this Locker's current session, and returns the lease with Expires =
// start + min(ttl, 2/3 S - TickTime/2), S the granted session timeout and start taken
// before the check (see "How long a lease is held" in the package doc). The check is
// a write that a quorum commits and that changes nothing: ZooKeeper keeps the lock
// for as long as the session lives, so there is nothing to extend (or shorten), and
// a Renew whose outcome is unknown leaves the server as it was. It returns an error
// wrapping distlock.ErrNotHeld when the node is gone, belongs to another session
// (the one that created it ended, or the lease is another client's), the lease's
// Expires has passed, or the lease was reported lost (see Lost) — also when that
// happens while the check is in flight: the lease reported lost, found not held, or
// unlocked meanwhile, or, for a lease watched through Lost, its Expires passed
// before the answer came. Renew settles its answer in one step with the Locker's
// loss monitor, so it never returns an Expires for a lease whose node the Locker
// deletes by the old one. A Renew after the lease's Expires lets the lease go: the
// Locker deletes its node (the holder was told the lease ended), so that the key
// does not stay locked for the rest of the session. Concurrent Renews of one Locker
// share multis of checks (see "Round trips" in the package doc). Errors are
// *distlock.OpError.
func (l *Locker) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	start := time.Now() // before the core's: a lease lapsed here is refused there
	next, err := l.core.Renew(ctx, lease, ttl)
	if err != nil && !start.Before(lease.Expires) {
		l.lapsed(lease)
	}
	return next, err
}

// lapsed lets go of lease, whose Expires has passed, if this Locker holds it and no
// Renew extended it since: it is lost (see loseLocked), and its node deleted.
func (l *Locker) lapsed(lease distlock.Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.held[lease.Token]
	if h == nil || h.key != lease.Key || h.fence != lease.Fence || time.Now().Before(h.expires) {
		return
	}
	s := l.subs[lease.Token]
	if s == nil {
		s = &sub{key: h.key, session: h.session, expires: h.expires}
	} else if time.Now().Before(s.expires) {
		return
	}
	l.loseLocked(lease.Token, s)
}

// Unlock deletes the lease's lock node. It returns an error wrapping
// distlock.ErrNotHeld when the node was already gone (released, or its session
// ended) or the lease was reported lost. When the delete's outcome is unknown (ctx
// ended, the connection broke), Unlock returns the error and keeps deleting the node
// in the background until it is gone or its session has ended; meanwhile the lease
// counts as lost (Lost closes; Renew and Unlock of it return ErrNotHeld). Errors
// are *distlock.OpError.
func (l *Locker) Unlock(ctx context.Context, lease distlock.Lease) error {
	return l.core.Unlock(ctx, lease)
}

// Inspect returns the holder of key: the lowest lock node, its czxid as Fence and
// its data as Owner (for another library's lock node, whatever that library
// stores). ZooKeeper locks have no ttl on the server, so Expires is an estimate:
// the request's start + this client's granted session timeout, the soonest the key
// would free itself if its holder (with a session like this client's) died then. It
// returns an error wrapping distlock.ErrNotHeld when the key is free. Errors are
// *distlock.OpError.
func (l *Locker) Inspect(ctx context.Context, key string) (distlock.Holder, error) {
	return l.core.Inspect(ctx, key)
}

// bg runs f in a goroutine of the Locker, also after Close: the Locker's own
// goroutines, which Close does not wait for (see Locker).
func (l *Locker) bg(f func()) {
	l.wg.Go(f)
}

// spawnLocked runs f in a goroutine of the Locker unless it is closed, and reports
// whether it does; l.mu is held.
func (l *Locker) spawnLocked(f func()) bool {
	if l.closed {
		return false
	}
	l.bg(f)
	return true
}

// keyPath returns the path of key's node.
func (l *Locker) keyPath(key string) string { return l.o.Prefix + "/" + keyName(key) }

// nodeOf returns the path of the lock node of the lease with key and token (a
// Token that parseToken accepted), so that the Locker keeps a key (the caller's
// string) rather than a path of its own per lease.
func (l *Locker) nodeOf(key, token string) string {
	h, _ := parseToken(token)
	return h.nodePath(l.keyPath(key))
}

// opError returns the error of a failed Wait: an *distlock.OpError.
func opError(op, key string, err error) error {
	return &distlock.OpError{Backend: backend, Op: op, Key: key, Err: asConnClosed(err)}
}

// call runs f, which makes ZooKeeper requests, and returns its result, or ctx's error
// as soon as ctx is done: go-zookeeper's requests take no context, so a request that
// is abandoned finishes in the background (every request ends when the connection is
// closed, at the latest).
func call[T any](ctx context.Context, f func() (T, error)) (T, error) {
	if ctx.Done() == nil {
		return f()
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		select {
		case r := <-ch:
			return r.v, r.err
		default:
		}
		var zero T
		return zero, ctx.Err()
	}
}
