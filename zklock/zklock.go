package zklock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
)

// Limits and defaults.
const (
	// DefaultRoot is the parent of every key's node when Options.Root is empty.
	DefaultRoot = "/distlock"
	// MaxKeyLen is the longest key, in bytes. A key's node is named by the base64url
	// encoding of its bytes (4/3 as long), and every request about a lock carries
	// that name, far below ZooKeeper's 1 MiB packet limit (jute.maxbuffer).
	MaxKeyLen = 4096
	// MaxOwnerLen is the longest Options.Owner label, in bytes.
	MaxOwnerLen = 256
)

// maxCreates bounds the creates of one TryLock that find the key's node missing (it
// raced with ZooKeeper's removal of the empty container).
const maxCreates = 5

// Pacing of TryLock's retries after a connection error.
const (
	retryMinBackoff = 5 * time.Millisecond
	retryMaxBackoff = 100 * time.Millisecond
)

// ErrClosed is returned by the methods of a Locker after Close.
var ErrClosed = errors.New("zklock: Locker is closed")

// Options configure a Locker. SessionTimeout is required; every other zero field
// means its default.
type Options struct {
	// SessionTimeout is the session timeout that the ZooKeeper server granted to the
	// connection: the timeout passed to zk.Connect, unless the server clamped it to
	// its [minSessionTimeout, maxSessionTimeout] (by default 2 and 20 ticks). It must
	// not be larger than the granted timeout, because a lease's Expires is derived
	// from it so that it never outlives the session (see "How long a lease is
	// held" in the package doc); a *zk.Conn does not tell the granted value, so the
	// Locker must be told. Required.
	SessionTimeout time.Duration
	// TickTime is the servers' tickTime, or an upper bound of it. The leader learns
	// that a session on a follower is alive only from the follower's answers to its
	// pings, which it sends every TickTime/2, so a lease's validity is reduced by
	// that much (see the package doc). Zero means SessionTimeout/2: a server grants
	// no session timeout below its minSessionTimeout, which is 2 ticks unless
	// configured. Set it when the servers' minSessionTimeout is below 2 ticks (then
	// the default is too small, and Expires unsound), or to the actual tickTime to
	// get longer leases. It must be positive and below 4/3 of SessionTimeout.
	TickTime time.Duration
	// Root is the persistent node under which every key gets its node. Lockers with
	// different roots never see each other's locks. An absolute path of components of
	// A-Z a-z 0-9 and -_.:@+=, outside /zookeeper. Default DefaultRoot.
	Root string
	// ACL is the ACL of every node the Locker creates (Root's components, the key
	// nodes, the lock nodes). Default zk.WorldACL(zk.PermAll).
	ACL []zk.ACL
	// Owner is a label stored as the data of every lock node this Locker creates;
	// Inspect reports it. It is for people, not for the owner check (that uses the
	// Lease's Token). At most MaxOwnerLen bytes. Default "<hostname>:<pid>".
	Owner string
	// DisconnectGrace is how long the connection to ZooKeeper may be down before
	// the Lost channels of this Locker's leases close ("suspended" means "maybe
	// lost"). Zero means at once, as Curator's default error policy treats
	// SUSPENDED like LOST. A larger grace keeps leases (and the work under Hold)
	// across short disconnections; the lease's Expires bounds it in any case. It must
	// not be negative.
	DisconnectGrace time.Duration
}

// withDefaults returns o with its zero fields filled in, or an error wrapping
// distlock.ErrInvalid that names the bad option.
func (o *Options) withDefaults() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	if r.SessionTimeout <= 0 {
		return r, fmt.Errorf("%w: zklock: Options.SessionTimeout %v: it is required and must be positive (the session timeout that the server granted the zk.Conn)", distlock.ErrInvalid, r.SessionTimeout)
	}
	if r.TickTime == 0 {
		r.TickTime = r.SessionTimeout / 2
	}
	if r.TickTime < 0 || leaseBound(r.SessionTimeout, r.TickTime) <= 0 {
		return r, fmt.Errorf("%w: zklock: Options.TickTime %v: it must be positive and below 4/3 of SessionTimeout %v (a lease's validity is 2/3 of the session timeout minus half a tick)", distlock.ErrInvalid, r.TickTime, r.SessionTimeout)
	}
	if r.Root == "" {
		r.Root = DefaultRoot
	}
	if err := validateRoot(r.Root); err != nil {
		return r, err
	}
	if len(r.ACL) == 0 {
		r.ACL = zk.WorldACL(zk.PermAll)
	}
	if r.Owner == "" {
		r.Owner = distlock.DefaultOwner()
	}
	if len(r.Owner) > MaxOwnerLen {
		return r, fmt.Errorf("%w: zklock: Options.Owner of %d bytes is longer than %d bytes", distlock.ErrInvalid, len(r.Owner), MaxOwnerLen)
	}
	if r.DisconnectGrace < 0 {
		return r, fmt.Errorf("%w: zklock: Options.DisconnectGrace %v is negative", distlock.ErrInvalid, r.DisconnectGrace)
	}
	return r, nil
}

// A Locker takes leases on keys as ephemeral-sequential nodes of one ZooKeeper
// session (one *zk.Conn). It implements distlock.Locker, distlock.Waiter,
// distlock.Inspector and distlock.LossNotifier, and is safe for concurrent use.
//
// Each TryLock and Wait runs its ZooKeeper requests in a goroutine of the Locker, so
// that the call can return when its context ends while the requests finish (and clean
// up) in the background. The Locker's other goroutines remove nodes that a cancelled
// or failed call left behind, and watch the session for Lost. Close stops them all.
type Locker struct {
	conn *zk.Conn
	o    Options
	data []byte // the lock nodes' data: Owner

	rootReady atomic.Bool // Root's components exist (as far as we know)

	mu         sync.Mutex
	closed     bool
	done       chan struct{} // closed by Close: calls and waits stop
	quit       chan struct{} // closed once Close gives up deleting nodes (see Close)
	quitOnce   sync.Once
	quitTimer  *time.Timer
	wg         sync.WaitGroup
	subs       map[string]*sub           // Lost subscriptions, by Token
	dead       map[string]struct{}       // Tokens declared lost whose node is being removed
	pending    map[string][]*pendingWait // waiter nodes for TryLock to claim, by key path
	monitoring bool                      // the monitor goroutine runs
}

var (
	_ distlock.Locker       = (*Locker)(nil)
	_ distlock.Waiter       = (*Locker)(nil)
	_ distlock.Inspector    = (*Locker)(nil)
	_ distlock.LossNotifier = (*Locker)(nil)
)

// New returns a Locker that uses conn's session. opts must set SessionTimeout (see
// Options); New returns an error wrapping distlock.ErrInvalid, naming the bad value,
// when conn is nil or an option is invalid.
//
// New does not take over conn: the caller closes it, after (or instead of) Close.
// The Locker observes the session through conn.State and conn.SessionID, so the
// caller keeps zk.Connect's event channel (go-zookeeper never blocks on it).
func New(conn *zk.Conn, opts *Options) (*Locker, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if conn == nil {
		return nil, fmt.Errorf("%w: zklock: nil *zk.Conn", distlock.ErrInvalid)
	}
	return &Locker{
		conn:    conn,
		o:       o,
		data:    []byte(o.Owner),
		done:    make(chan struct{}),
		quit:    make(chan struct{}),
		subs:    make(map[string]*sub),
		dead:    make(map[string]struct{}),
		pending: make(map[string][]*pendingWait),
	}, nil
}

// Close stops the Locker: calls in flight return (a Wait with ErrClosed at once), as
// does every later call, with ErrClosed, and every Lost channel closes. With the
// zk.Conn still open, Close then deletes the nodes that only the Locker would have
// deleted, so that they do not keep the key for the rest of the session: the waiter
// nodes of its Waits, the lock nodes of leases watched through Lost (Close reports
// them lost), and nodes that cancelled or failed calls left. It waits for that, and
// for requests in flight, and gives up after SessionTimeout if the connection stays
// down. Closing the zk.Conn first makes Close return at once (the session's end
// deletes all its nodes). Close does not close the zk.Conn; leases that are not
// watched stay held until Unlock (before Close) or the session's end.
func (l *Locker) Close() error {
	l.mu.Lock()
	first := !l.closed
	if first {
		l.closed = true
		close(l.done)
		for tok, s := range l.subs {
			close(s.ch)
			delete(l.subs, tok)
			owner := l.owner(s)
			l.cleanupLocked(func() { l.reapNode(s.node, owner) })
		}
		for kp, ws := range l.pending {
			for _, w := range ws {
				w.timer.Stop()
				l.cleanupLocked(func() { l.reapNode(w.path, 0) })
			}
			delete(l.pending, kp)
		}
		l.quitTimer = time.AfterFunc(l.o.SessionTimeout, l.stopCleanup)
	}
	l.mu.Unlock()
	l.wg.Wait()
	if first {
		l.stopCleanup() // a concurrent Close must not cut the first one's cleanup short
	}
	return nil
}

// cleanupLocked runs f in a goroutine that Close waits for, also while Close runs;
// l.mu is held.
func (l *Locker) cleanupLocked(f func()) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		f()
	}()
}

// stopCleanup makes the node removals still running after Close give up.
func (l *Locker) stopCleanup() {
	l.quitOnce.Do(func() {
		l.mu.Lock()
		if l.quitTimer != nil {
			l.quitTimer.Stop()
		}
		l.mu.Unlock()
		close(l.quit)
	})
}

// spawn runs f in a goroutine that Close waits for; it returns false after Close.
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

// keyPath returns the path of key's node.
func (l *Locker) keyPath(key string) string { return l.o.Root + "/" + keyName(key) }

// short returns key for messages, cut to 64 bytes.
func short(key string) string {
	if len(key) > 64 {
		return strconv.Quote(key[:64]) + "..."
	}
	return strconv.Quote(key)
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
