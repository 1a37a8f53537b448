package zklock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
)

// backend is the Backend of every *distlock.OpError this package returns.
const backend = "zklock"

// maxCreates bounds the creates of one TryLock that find the key's node missing (it
// raced with ZooKeeper's removal of the empty container).
const maxCreates = 5

// Pacing of TryLock's retries after a connection error.
const (
	retryMinBackoff = 5 * time.Millisecond
	retryMaxBackoff = 100 * time.Millisecond
)

// A Locker takes leases on keys as ephemeral-sequential nodes of one ZooKeeper
// session (a Session). It implements distlock.Locker, distlock.Waiter,
// distlock.Inspector, distlock.LossNotifier and distlock.LossWatcher, and is safe
// for concurrent use.
//
// Each TryLock and Wait runs its ZooKeeper requests in a goroutine of the Locker, so
// that the call can return when its context ends while the requests finish (and clean
// up) in the background. The Locker's other goroutines remove nodes that a cancelled
// or failed call left behind, watch the session for Lost, and send Renew's checks.
// Close stops them, except the removals of nodes, which run until each node is gone
// or the Session's connection is closed (see Close).
type Locker struct {
	sess *Session
	conn *zk.Conn
	o    Options
	data []byte // the lock nodes' data: Owner

	prefixReady atomic.Bool      // Prefix's components exist (as far as we know)
	crowded     [256]atomic.Bool // hints by key path: see crowd

	mu         sync.Mutex
	closed     bool
	done       chan struct{}             // closed by Close: calls and waits stop
	wg         sync.WaitGroup            // the Locker's goroutines (tests wait for them)
	held       map[string]*heldLease     // leases that TryLock returned and that may still be held, by Token
	subs       map[string]*sub           // Lost subscriptions, by Token
	dead       map[string]struct{}       // Tokens declared lost (or being unlocked) whose node is being removed
	flights    map[string]*renewFlight   // Renews waiting for the server, by Token
	pending    map[string][]*pendingWait // waiter nodes for TryLock to claim, by key path
	monitoring bool                      // the monitor goroutine runs
	checks     checks                    // Renew's checks waiting for a multi
	checkEach  bool                      // each check goes alone, at once (a measurement switch: see checks.go)

	// renewHook, when not nil, runs in Renew after the server confirmed the lease
	// and before Renew's answer is settled: tests put a loss of the lease there.
	renewHook func(distlock.Lease)
}

// A heldLease is a lease that this Locker's TryLock returned and that no Unlock,
// Renew or loss has found released yet: Close deletes its node.
type heldLease struct {
	key     string        // the lease's Key: with its Token, it names the node (nodeOf)
	session int64         // the node's owner
	fence   uint64        // the node's czxid: the lease's Fence
	least   time.Duration // the smallest session timeout granted when Expires was last set
	expires time.Time     // the latest Expires that TryLock or Renew returned
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
	return &Locker{
		sess:    s,
		conn:    s.conn,
		o:       o,
		data:    []byte(o.Owner),
		done:    make(chan struct{}),
		held:    make(map[string]*heldLease),
		subs:    make(map[string]*sub),
		dead:    make(map[string]struct{}),
		flights: make(map[string]*renewFlight),
		pending: make(map[string][]*pendingWait),
	}, nil
}

// Close stops the Locker and returns at once, without waiting for the server:
//
//   - Every later call returns an error wrapping distlock.ErrClosed, as do the calls
//     in flight that wait on the Locker: a Wait, a TryLock (whose attempt finishes
//     in the background; a lock it wins is released), a Renew of a lease that this
//     Locker's TryLock returned. An Unlock or Inspect in flight returns with its
//     request's answer, or when its context ends.
//   - Every Lost channel closes, and the AfterLost functions run.
//   - It releases every lease that the Locker holds (nobody could Unlock it any
//     more), including those of calls in flight (an Unlock whose outcome is
//     unknown, a TryLock that wins as Close runs), and deletes the waiter nodes of
//     its Waits and the nodes that cancelled or failed calls left: in the
//     background, retrying until each node is gone or its session has ended, for
//     as long as the Session's connection is open. A quorum loss longer than the
//     session timeout delays the deletion, not ends it: the session may outlive it
//     (a new leader gives every session a full timeout). So after Close a key that
//     the Locker held is freed within a round trip while the ensemble serves, or
//     once it serves again; closing the Session frees every key at once, and ends
//     the background work.
//
// Close does not close the Session. A second Close returns nil.
func (l *Locker) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	close(l.done)
	reaped := make(map[string]bool)
	for tok, s := range l.subs {
		s.fire()
		delete(l.subs, tok)
		owner := l.owner(s)
		node := l.nodeOf(s.key, tok)
		reaped[node] = true
		l.cleanupLocked(func() { l.reapNode(node, owner) })
	}
	for tok, h := range l.held {
		delete(l.held, tok)
		if node := l.nodeOf(h.key, tok); !reaped[node] {
			l.cleanupLocked(func() { l.reapNode(node, h.session) })
		}
	}
	for kp, ws := range l.pending {
		for _, w := range ws {
			w.timer.Stop()
			l.cleanupLocked(func() { l.reapPending(w) })
		}
		delete(l.pending, kp)
	}
	return nil
}

// cleanupLocked runs f in a goroutine of the Locker, also while Close runs; l.mu is
// held.
func (l *Locker) cleanupLocked(f func()) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		f()
	}()
}

// spawn runs f in a goroutine of the Locker; it returns false after Close.
func (l *Locker) spawn(f func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.spawnLocked(f)
}

func (l *Locker) spawnLocked(f func()) bool {
	if l.closed {
		return false
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		f()
	}()
	return true
}

func (l *Locker) isClosed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// addHeld records a lease that TryLock won; it returns false after Close (the caller
// deletes the node).
func (l *Locker) addHeld(token string, h *heldLease) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.held[token] = h
	return true
}

// dropHeld forgets a lease that is released, lost or found not held.
func (l *Locker) dropHeld(token string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.held, token)
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

// opError returns the error of a failed call: an *distlock.OpError. A transport
// error (see connBroke) is also zk.ErrConnectionClosed, which says that the call's
// outcome is unknown.
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
