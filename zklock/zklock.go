package zklock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
	// not be larger than the granted timeout, because a lease's Expires is capped at
	// start + SessionTimeout so that it never outlives the session; a *zk.Conn does
	// not tell the granted value, so the Locker must be told. Required.
	SessionTimeout time.Duration
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
	done       chan struct{} // closed by Close
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
		subs:    make(map[string]*sub),
		dead:    make(map[string]struct{}),
		pending: make(map[string][]*pendingWait),
	}, nil
}

// Close stops the Locker's background work and waits until its goroutines have
// exited, which includes ZooKeeper requests they have in flight: close the zk.Conn
// first for an immediate return (closing the session makes ZooKeeper delete every
// lock node of the session anyway). After Close every Lost channel is closed and
// every method returns ErrClosed. Close does not close the zk.Conn.
func (l *Locker) Close() error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.done)
		for tok, s := range l.subs {
			close(s.ch)
			delete(l.subs, tok)
		}
		for kp, ws := range l.pending {
			for _, w := range ws {
				w.timer.Stop()
			}
			delete(l.pending, kp)
		}
	}
	l.mu.Unlock()
	l.wg.Wait()
	return nil
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

// validity is how long a lease is certainly held after a request that was sent at
// start and answered: ttl, capped by the session timeout (the server expires the
// session no earlier than SessionTimeout after it last heard from the client, which
// was no earlier than start).
func (l *Locker) validity(ttl time.Duration) time.Duration { return min(ttl, l.o.SessionTimeout) }

// short returns key for messages, cut to 64 bytes.
func short(key string) string {
	if len(key) > 64 {
		return strconv.Quote(key[:64]) + "..."
	}
	return strconv.Quote(key)
}

// TryLock makes one attempt to acquire key: it creates a protected
// ephemeral-sequential node under the key's node and holds the lock when that node has
// the lowest sequence number among the key's lock nodes; otherwise it deletes its node
// and returns an error wrapping distlock.ErrLocked. The lease's Fence is the node's
// czxid; its Expires is the request's start + min(ttl, SessionTimeout).
//
// When ctx ends first, TryLock returns ctx's error at once and the attempt finishes in
// the background, which deletes the node if it was created. A node whose create lost
// its reply (the connection broke) is found again by its protected id: it is used, or
// deleted, never left behind.
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	if err := distlock.ValidateKey(key, MaxKeyLen); err != nil {
		return distlock.Lease{}, fmt.Errorf("zklock: TryLock: %w", err)
	}
	if err := distlock.ValidateTTL(ttl); err != nil {
		return distlock.Lease{}, fmt.Errorf("zklock: TryLock(%s): %w", short(key), err)
	}
	if err := ctx.Err(); err != nil {
		return distlock.Lease{}, fmt.Errorf("zklock: TryLock(%s): %w", short(key), err)
	}
	const (
		pending int32 = iota
		delivered
		abandoned
	)
	var state atomic.Int32
	res := make(chan outcome, 1)
	start := time.Now()
	a := &attempt{l: l, key: key, keyPath: l.keyPath(key), id: distlock.NewToken(), start: start, ttl: ttl, abandon: ctx.Done()}
	if !l.spawn(func() {
		o, cleanup := a.run()
		if state.CompareAndSwap(pending, delivered) {
			res <- o
		} else if o.err == nil {
			// The caller gave up before the lock was won: release it.
			prev := cleanup
			cleanup = func() {
				l.reapNode(o.node, o.session)
				if prev != nil {
					prev()
				}
			}
		}
		if cleanup != nil {
			cleanup()
		}
	}) {
		return distlock.Lease{}, fmt.Errorf("zklock: TryLock(%s): %w", short(key), ErrClosed)
	}
	select {
	case o := <-res:
		return o.lease, o.err
	case <-ctx.Done():
		if state.CompareAndSwap(pending, abandoned) {
			return distlock.Lease{}, fmt.Errorf("zklock: TryLock(%s): %w (the attempt finishes, and cleans up, in the background)", short(key), ctx.Err())
		}
		o := <-res
		return o.lease, o.err
	}
}

// outcome is the result of an attempt.
type outcome struct {
	lease   distlock.Lease
	node    string // the lock node, when won
	session int64  // its session, when won
	err     error
}

// attempt is one TryLock.
type attempt struct {
	l       *Locker
	key     string
	keyPath string
	id      string // the protected id of the nodes it creates
	start   time.Time
	ttl     time.Duration
	abandon <-chan struct{} // the caller's ctx.Done(): stop retrying
	backoff time.Duration
}

func (a *attempt) abandoned() bool {
	select {
	case <-a.abandon:
		return true
	default:
		return false
	}
}

// again reports whether the attempt should retry after err, and waits a little first.
// A connection error is retried while the caller waits, the Locker is open and the
// attempt is younger than the session timeout (a connection that stays down longer
// than that has lost its session anyway).
func (a *attempt) again(err error) bool {
	if !retriable(err) || a.abandoned() || time.Since(a.start) > a.l.o.SessionTimeout {
		return false
	}
	a.backoff = min(max(2*a.backoff, retryMinBackoff), retryMaxBackoff)
	t := time.NewTimer(a.backoff)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-a.abandon:
		return false
	case <-a.l.done:
		return false
	}
}

func (a *attempt) fail(err error) outcome {
	return outcome{err: fmt.Errorf("zklock: TryLock(%s): %w", short(a.key), err)}
}

// retriable reports whether a request failed because the connection broke (the
// request may or may not have been applied) or could not be sent.
func retriable(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrSessionMoved)
}

// run makes the attempt. cleanup, when not nil, is work that must follow in the
// background whatever the caller does: removing nodes the attempt may have left, and
// the waiter node (see Wait) that this TryLock claimed.
func (a *attempt) run() (o outcome, cleanup func()) {
	w := a.l.claimWait(a.keyPath)
	o, cleanup = a.lock()
	if w != "" {
		// Now that our lock node exists (or lost), let the next waiter move up.
		prev := cleanup
		cleanup = func() {
			if prev != nil {
				prev()
			}
			a.l.reapNode(w, 0)
		}
	}
	return o, cleanup
}

func (a *attempt) lock() (o outcome, cleanup func()) {
	l := a.l
	reapID := func() { l.reapByID(a.keyPath, a.id) }

	// 1. Create the node, or find it again after a lost reply.
	var node string
	unknown := false // a create may have been applied without our knowing
	for creates := 0; ; {
		path, err := l.conn.Create(lockNodePrefix(a.keyPath, a.id), l.data, zk.FlagEphemeralSequential, l.o.ACL)
		if err == nil {
			node = path
			break
		}
		switch {
		case errors.Is(err, zk.ErrNoNode):
			// The key's node (or Root) does not exist yet, or was just removed.
			if creates++; creates >= maxCreates {
				return a.fail(err), cleanupIf(unknown, reapID)
			}
			if err = l.ensureKeyNode(a.keyPath); err == nil {
				continue
			}
		case errors.Is(err, zk.ErrConnectionClosed):
			// The request may have been applied: look for the node by its id.
			unknown = true
			found, ferr := l.findOwn(a.keyPath, a.id)
			if ferr == nil && found != "" {
				node = found
			} else if ferr != nil {
				err = ferr
			}
		case retriable(err):
			// Not sent, or the session expired (with it, any node it had).
		default:
			return a.fail(err), cleanupIf(unknown, reapID)
		}
		if node != "" {
			break
		}
		if !a.again(err) {
			return a.fail(err), cleanupIf(unknown, reapID)
		}
	}

	// 2. List the contenders, and read our node's stat (for the fence) in the same
	// round trip: go-zookeeper pipelines requests on the connection. Our node was
	// created after every lower one, so the server that answers has seen them all.
	type statResult struct {
		exists bool
		stat   *zk.Stat
		err    error
	}
	statc := make(chan statResult, 1)
	go func() {
		ok, stat, err := l.conn.Exists(node)
		statc <- statResult{ok, stat, err}
	}()
	var children []string
	for {
		var err error
		children, _, err = l.conn.Children(a.keyPath)
		if err == nil {
			break
		}
		if !a.again(err) {
			return a.fail(err), reapID
		}
	}
	var own []contender
	var lowest *contender
	for _, name := range children {
		c, ok := parseContender(name)
		if !ok {
			continue // foreign child
		}
		if c.id == a.id {
			own = append(own, c)
		}
		if lowest == nil || c.seq < lowest.seq {
			lowest = &c
		}
	}
	if len(own) == 0 {
		// Our node is gone: the session expired after the create.
		return a.fail(fmt.Errorf("lock node %s vanished: the ZooKeeper session ended (%w)", node, zk.ErrSessionExpired)), reapID
	}
	mine := own[0]
	for _, c := range own[1:] {
		if c.seq < mine.seq {
			mine = c
		}
	}

	// 3. Lost: delete our node(s) and report the holder.
	if lowest.id != a.id {
		for _, c := range own {
			if err := l.conn.Delete(a.keyPath+"/"+c.name, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				cleanup = reapID
			}
		}
		return outcome{err: fmt.Errorf("zklock: TryLock(%s): held by lock node %s: %w", short(a.key), lowest.name, distlock.ErrLocked)}, cleanup
	}

	// 4. Won. Remove duplicates that lost replies left, and take the fence.
	minePath := a.keyPath + "/" + mine.name
	var dups []string
	for _, c := range own {
		if c.name != mine.name {
			dups = append(dups, a.keyPath+"/"+c.name)
		}
	}
	for _, p := range dups {
		if err := l.conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			cleanup = func() {
				for _, p := range dups {
					l.reapNode(p, 0)
				}
			}
		}
	}
	sr := <-statc
	if minePath != node || sr.err != nil {
		for {
			if sr.exists, sr.stat, sr.err = l.conn.Exists(minePath); sr.err == nil || !a.again(sr.err) {
				break
			}
		}
	}
	if sr.err != nil {
		return a.fail(sr.err), func() {
			if cleanup != nil {
				cleanup()
			}
			l.reapNode(minePath, 0)
		}
	}
	if !sr.exists {
		return a.fail(fmt.Errorf("lock node %s vanished: the ZooKeeper session ended (%w)", minePath, zk.ErrSessionExpired)), cleanup
	}
	h := handle{id: a.id, seq: mine.seq}
	lease := distlock.Lease{
		Key:     a.key,
		Token:   h.token(),
		Fence:   uint64(sr.stat.Czxid),
		Expires: a.start.Add(l.validity(a.ttl)),
	}
	return outcome{lease: lease, node: minePath, session: sr.stat.EphemeralOwner}, cleanup
}

func cleanupIf(cond bool, f func()) func() {
	if cond {
		return f
	}
	return nil
}

// findOwn returns the path of a child of keyPath with protected id, or "" when there
// is none. It syncs the server with the leader first, so that a create that reached
// the ensemble before the connection broke is seen.
func (l *Locker) findOwn(keyPath, id string) (string, error) {
	if _, err := l.conn.Sync(keyPath); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return "", err
	}
	children, _, err := l.conn.Children(keyPath)
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var best *contender
	for _, name := range children {
		if c, ok := parseContender(name); ok && c.id == id && (best == nil || c.seq < best.seq) {
			best = &c
		}
	}
	if best == nil {
		return "", nil
	}
	return keyPath + "/" + best.name, nil
}

// ensureKeyNode creates Root's components (persistent) and keyPath (a container
// node, which ZooKeeper deletes once it has had children and is empty again).
func (l *Locker) ensureKeyNode(keyPath string) error {
	create := func() error {
		_, err := l.conn.CreateContainer(keyPath, nil, zk.FlagContainer, l.o.ACL)
		if errors.Is(err, zk.ErrNodeExists) {
			return nil
		}
		return err
	}
	if l.rootReady.Load() {
		err := create()
		if !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		l.rootReady.Store(false) // someone removed Root
	}
	parts := strings.Split(l.o.Root[1:], "/")
	p := ""
	for _, c := range parts {
		p += "/" + c
		_, err := l.conn.Create(p, nil, zk.FlagPersistent, l.o.ACL)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	l.rootReady.Store(true)
	return create()
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

// leaseNode validates lease and returns its handle and node path. A Token that this
// package did not make names no lock: ErrNotHeld.
func (l *Locker) leaseNode(op string, lease distlock.Lease) (handle, string, error) {
	if err := distlock.ValidateLease(lease); err != nil {
		return handle{}, "", fmt.Errorf("zklock: %s: %w", op, err)
	}
	if err := distlock.ValidateKey(lease.Key, MaxKeyLen); err != nil {
		return handle{}, "", fmt.Errorf("zklock: %s: Lease: %w", op, err)
	}
	h, ok := parseToken(lease.Token)
	if !ok {
		return handle{}, "", fmt.Errorf("zklock: %s(%s): the Lease's Token is not one of a zklock lock node: %w", op, short(lease.Key), distlock.ErrNotHeld)
	}
	return h, h.nodePath(l.keyPath(lease.Key)), nil
}

// Renew checks that the lease's lock node still exists and belongs to this Locker's
// current session, and returns the lease with Expires = now + min(ttl,
// SessionTimeout), now taken before the check. ZooKeeper keeps the lock for as long
// as the session lives, so there is nothing to extend on the server: Renew proves
// that the session is alive. It returns an error wrapping distlock.ErrNotHeld when
// the node is gone, belongs to another session (the one that created it ended, or
// the lease is another client's), or the lease was reported lost (see Lost).
func (l *Locker) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	_, node, err := l.leaseNode("Renew", lease)
	if err != nil {
		return distlock.Lease{}, err
	}
	if err := distlock.ValidateTTL(ttl); err != nil {
		return distlock.Lease{}, fmt.Errorf("zklock: Renew(%s): %w", short(lease.Key), err)
	}
	fail := func(err error) (distlock.Lease, error) {
		return distlock.Lease{}, fmt.Errorf("zklock: Renew(%s): %w", short(lease.Key), err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if l.isClosed() {
		return fail(ErrClosed)
	}
	if err := l.checkDead(lease.Token); err != nil {
		return fail(err)
	}
	start := time.Now()
	stat, err := call(ctx, func() (*zk.Stat, error) {
		ok, stat, err := l.conn.Exists(node)
		if err == nil && !ok {
			err = zk.ErrNoNode
		}
		return stat, err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		l.dropSub(lease.Token)
		return fail(fmt.Errorf("lock node is gone: %w", distlock.ErrNotHeld))
	case errors.Is(err, zk.ErrSessionExpired):
		l.dropSub(lease.Token)
		return fail(fmt.Errorf("the ZooKeeper session expired: %w", distlock.ErrNotHeld))
	case err != nil:
		return fail(err)
	case uint64(stat.Czxid) != lease.Fence:
		return fail(fmt.Errorf("the lock node was not created by this lease's acquisition: %w", distlock.ErrNotHeld))
	}
	// Read the session after the reply: a session that expired meanwhile has already
	// been replaced on the connection.
	if sid := l.conn.SessionID(); stat.EphemeralOwner != sid {
		l.dropSub(lease.Token)
		return fail(fmt.Errorf("the lock node belongs to ZooKeeper session %#x, not to this client's session %#x (it ended, or the lease is another client's): %w", stat.EphemeralOwner, sid, distlock.ErrNotHeld))
	}
	if err := l.checkDead(lease.Token); err != nil {
		return fail(err)
	}
	next := lease
	next.Expires = start.Add(l.validity(ttl))
	l.extendSub(lease.Token, next.Expires)
	return next, nil
}

// checkDead returns an error wrapping ErrNotHeld when the lease was reported lost.
func (l *Locker) checkDead(token string) error {
	l.mu.Lock()
	_, dead := l.dead[token]
	l.mu.Unlock()
	if dead {
		return fmt.Errorf("the lease was reported lost and its node is being removed: %w", distlock.ErrNotHeld)
	}
	return nil
}

// Unlock deletes the lease's lock node. It returns an error wrapping
// distlock.ErrNotHeld when the node was already gone (released, or its session
// ended) or the lease was reported lost. When the delete's outcome is unknown (ctx
// ended, the connection broke), Unlock returns the error and keeps deleting the node
// in the background until it is gone or its session has ended.
func (l *Locker) Unlock(ctx context.Context, lease distlock.Lease) error {
	_, node, err := l.leaseNode("Unlock", lease)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		return fmt.Errorf("zklock: Unlock(%s): %w", short(lease.Key), err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if l.isClosed() {
		return fail(ErrClosed)
	}
	if err := l.checkDead(lease.Token); err != nil {
		return fail(err)
	}
	// The node's path is the Token's: it is unique to the acquisition and holds its
	// 128 random bits, so this cannot delete another acquisition's node.
	_, err = call(ctx, func() (struct{}, error) { return struct{}{}, l.conn.Delete(node, -1) })
	switch {
	case err == nil:
		l.dropSub(lease.Token)
		return nil
	case errors.Is(err, zk.ErrNoNode):
		l.dropSub(lease.Token)
		return fail(fmt.Errorf("lock node is gone: %w", distlock.ErrNotHeld))
	case errors.Is(err, zk.ErrSessionExpired):
		l.dropSub(lease.Token)
		return fail(fmt.Errorf("the ZooKeeper session expired: %w", distlock.ErrNotHeld))
	default:
		l.spawn(func() { l.reapNode(node, 0) })
		return fail(err)
	}
}
