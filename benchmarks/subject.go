package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/faultproxy"
)

// ErrBusy is what a Client's TryLock returns (wrapped) when another owner holds the
// key.
var ErrBusy = errors.New("benchmarks: key is held by another owner")

// A Role says what a Subject is in the matrix.
type Role string

// The roles.
const (
	Ours  Role = "ours"  // a distlock backend
	Peer  Role = "peer"  // a library a user would pick instead
	Floor Role = "floor" // the protocol's minimum round trips, issued by hand
)

// Workload names, as they appear in the results.
const (
	W1 = "W1" // uncontended TryLock+Unlock
	W2 = "W2" // contended handoff
	W3 = "W3" // failover
	W4 = "W4" // herd: many waiters on one key
	W5 = "W5" // many leases held at once under distlock.Hold
)

// Workloads are every workload, in run order.
var Workloads = []string{W1, W2, W3, W4, W5}

// A Held is one acquisition.
type Held interface {
	// Unlock releases it.
	Unlock(ctx context.Context) error
}

// A Client is one client of a lock service: its own connections (a pool, a session).
// It must be safe for concurrent use: W1 shares one Client among its goroutines.
type Client interface {
	// TryLock makes one attempt; it returns an error wrapping ErrBusy when the key
	// is held by another owner.
	TryLock(ctx context.Context, key string) (Held, error)
	// Lock blocks until it holds key or ctx ends, the way users of the library wait
	// (distlock.Lock for ours; the peer's own blocking call for peers).
	Lock(ctx context.Context, key string) (Held, error)
	// Close releases the client's connections and goroutines. It does not unlock.
	Close() error
}

// A Route maps a server address (host:port) to the address a client must dial
// instead. W3 routes the holder's client through a faultproxy; nil means direct.
type Route func(addr string) (string, error)

// Dial applies r to addr; a nil Route returns addr unchanged.
func (r Route) Dial(addr string) (string, error) {
	if r == nil {
		return addr, nil
	}
	return r(addr)
}

// A Subject is one row of the matrix.
type Subject struct {
	// Name names the row: "redislock", "redsync", "redis raw floor", ...
	Name string
	// Protocol groups the rows that talk to the same kind of server: "redis",
	// "redlock", "etcd", "zookeeper", "postgres", "mysql", "sqlite", "memory".
	Protocol string
	// Role: Ours, Peer or Floor.
	Role Role
	// Wakeup says how a blocked acquire learns of a release ("pub/sub", "watch",
	// "poll 50-250ms", ...).
	Wakeup string
	// Waiter is true for a distlock backend that implements distlock.Waiter.
	Waiter bool
	// Workloads lists the workloads the Subject runs: floors run W1 only.
	Workloads []string
	// Bound is what W3's failover is compared with: the ttl the holder asked for or
	// its session timeout; zero when there is none (a lock held by a connection).
	Bound time.Duration
	// BoundKind names Bound: "ttl", "session timeout", or what frees the lock when
	// Bound is zero.
	BoundKind string
	// Baseline is true for the row that W1's ratios of its Protocol compare with:
	// the floor (or a peer that is the floor too).
	Baseline bool
	// Networked is true when the Subject's clients connect to a server: W3 then
	// routes the holder through faultproxies and cuts them. Otherwise W3 closes
	// the holder's Client without unlocking.
	Networked bool
	// New returns a new Client whose connections go through route.
	New func(ctx context.Context, route Route) (Client, error)
	// Unavailable, when not empty, says why the Subject was not measured.
	Unavailable string
	// Note is a remark shown with the Subject's rows.
	Note string
	// Requests, when not nil, reads the server's own count of the requests it
	// received: W4 and W5 report server requests per handoff and per renewal
	// from it.
	Requests *Counter
}

// Runs reports whether s runs workload w.
func (s Subject) Runs(w string) bool {
	for _, x := range s.Workloads {
		if x == w {
			return true
		}
	}
	return false
}

// all is the Workloads of a peer: W4 and W5 need a distlock.Locker (Hold), so
// they are our backends' only.
var all = []string{W1, W2, W3}

// ours is the Workloads of one of our backends: everything.
var ours = []string{W1, W2, W3, W4, W5}

// w1Only is the Workloads of a raw floor.
var w1Only = []string{W1}

// lockerClient adapts a distlock.Locker: TryLock and Unlock directly, Lock through
// distlock.Lock (which uses the Locker's Waiter when it has one).
type lockerClient struct {
	l     distlock.Locker
	ttl   time.Duration
	close func() error
}

func (c *lockerClient) TryLock(ctx context.Context, key string) (Held, error) {
	lease, err := c.l.TryLock(ctx, key, c.ttl)
	if err != nil {
		if errors.Is(err, distlock.ErrLocked) {
			return nil, fmt.Errorf("%w: %w", ErrBusy, err)
		}
		return nil, err
	}
	return leaseHeld{c.l, lease}, nil
}

func (c *lockerClient) Lock(ctx context.Context, key string) (Held, error) {
	lease, err := distlock.Lock(ctx, c.l, key, c.ttl, nil)
	if err != nil {
		return nil, err
	}
	return leaseHeld{c.l, lease}, nil
}

func (c *lockerClient) Close() error {
	if c.close == nil {
		return nil
	}
	return c.close()
}

// closeBoth returns a close function that closes a Locker, then the client it uses
// (the Locker waits for its calls and clean-ups, which need the client).
func closeBoth(locker, client func() error) func() error {
	return func() error { return errors.Join(locker(), client()) }
}

type leaseHeld struct {
	l     distlock.Locker
	lease distlock.Lease
}

func (h leaseHeld) Unlock(ctx context.Context) error { return h.l.Unlock(ctx, h.lease) }

// A crasher routes a client through one faultproxy per server address, and cuts
// them all to kill the client.
type crasher struct {
	mu      sync.Mutex
	proxies map[string]*faultproxy.Proxy
}

func newCrasher() *crasher { return &crasher{proxies: make(map[string]*faultproxy.Proxy)} }

// route is a Route through c's proxies.
func (c *crasher) route(addr string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.proxies[addr]; ok {
		return p.Addr(), nil
	}
	p, err := faultproxy.New(addr, nil)
	if err != nil {
		return "", err
	}
	c.proxies[addr] = p
	return p.Addr(), nil
}

// cut resets every connection through c's proxies and refuses new ones.
func (c *crasher) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.proxies {
		p.Cut()
	}
}

// close closes every proxy.
func (c *crasher) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, p := range c.proxies {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}
