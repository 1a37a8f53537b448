package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/driver"
)

// simnet puts a simulated network between clients and an in-process lock table, so
// that the suite's fault tests (partition, delay, paused server, abandoned attempts)
// run without servers, and mutants of the client side can be shown to fail them.
//
// Each call is a request that travels for the client's delay, waits while the server
// is paused, runs on the server whatever the caller's context says, and travels back.
// A caller whose context ends first gets ctx.Err() while its request carries on, as
// on a real network; a correct client then removes the lock its abandoned TryLock
// made, with a fresh context.
//
// The server is a cluster of simMembers members, each client talking to one of them.
// A member isolated from its peers cannot serve (its requests time out, as on a member
// without a quorum), unless a server bug makes it answer from its own stale view. A
// leader change, a minority losing its data and a restart interrupt service briefly
// and keep the table — unless a server bug makes them lose it.
type simServer struct {
	mu       sync.Mutex
	resumed  chan struct{} // nil while running; closed by resume
	flight   sync.WaitGroup
	tab      distlock.Locker
	fresh    func() distlock.Locker // an empty table, for the bugs that lose data
	bugs     serverBugs
	isolated [simMembers]bool
	next     int // the member of the next client
}

const simMembers = 3

// serverBugs are the cluster-side mutations simnet can apply.
type serverBugs struct {
	leaderLocal    bool // the lock table lives on the leader only: a leader change loses it
	unreplicated   bool // writes reach a minority only: losing a minority loses the table
	restartForgets bool // a restart loses the table, and the harness does not declare it
	renewShortens  bool // a Renew with a shorter ttl cuts the lease on the server
}

// table returns the current lock table.
func (s *simServer) table() distlock.Locker {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tab
}

// outage interrupts service briefly (a re-election, a restart); lose replaces the
// table with an empty one, as a fault that loses data does.
func (s *simServer) outage(lose bool) {
	resume := s.pause()
	if lose {
		s.mu.Lock()
		s.tab = s.fresh()
		s.mu.Unlock()
	}
	time.Sleep(20 * time.Millisecond)
	resume()
}

func (s *simServer) isolatedMember(m int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.isolated[m]
}

func (s *simServer) isolate(m int) (heal func()) {
	s.mu.Lock()
	s.isolated[m] = true
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.isolated[m] = false
			s.mu.Unlock()
		})
	}
}

func (s *simServer) pause() (resume func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	s.resumed = ch
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.resumed = nil
			s.mu.Unlock()
			close(ch)
		})
	}
}

// gate blocks while the server is paused.
func (s *simServer) gate() {
	s.mu.Lock()
	ch := s.resumed
	s.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// clientBugs are the client-side mutations simnet can apply.
type clientBugs struct {
	keepAbandoned bool // do not clean up an abandoned TryLock's lock
	errAsLocked   bool // report transport errors as ErrLocked
	localRenew    bool // "renew" from the local clock without asking the server
	staleRenew    bool // an isolated member answers Renew from its own stale view
	expiredLease  bool // return a lease whose ttl ran out during the round trip
	deafRenew     bool // Renew ignores its ctx while the network does not answer
	batchRenew    bool // Renews share a batch whose ctx ends with its last caller's
	// session makes the client a simSession (1), one whose Close gives up the
	// deletion of its expired locks (2), or one whose Renew races its reaper (3).
	session int
}

type simClient struct {
	member int
	srv    *simServer
	bugs   clientBugs
	mu     sync.Mutex
	cut    bool
	delay  time.Duration
	closed bool
	batch  *simBatch // the Renews in flight, with bugs.batchRenew
}

// A simBatch is the shared context of the Renews in flight of a client with
// bugs.batchRenew: it ends only when every caller's ctx has ended, and each caller
// waits on it instead of its own, as a batch led by its first caller would.
type simBatch struct {
	ctx    context.Context
	cancel context.CancelFunc
	left   int
}

// joinBatch returns the ctx of the client's current batch of Renews, joined by ctx.
func (c *simClient) joinBatch(ctx context.Context) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.batch == nil {
		bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		c.batch = &simBatch{ctx: bctx, cancel: cancel}
	}
	b := c.batch
	b.left++
	context.AfterFunc(ctx, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if b.left--; b.left == 0 {
			b.cancel()
			if c.batch == b {
				c.batch = nil
			}
		}
	})
	return b.ctx
}

var errSimTransport = errors.New("simnet: connection timed out")

// deafKey marks the ctx of a call that ignores it while the network is silent.
type deafKey struct{}

// readTimeout bounds a call through a partition, as a client's socket timeout would.
const readTimeout = time.Second

func roundTrip[T any](ctx context.Context, c *simClient, op func() (T, error), abandoned func(T, error)) (T, error) {
	var zero T
	c.mu.Lock()
	cut, d, closed := c.cut, c.delay, c.closed
	c.mu.Unlock()
	// Every request and reply takes up to half a millisecond, as on a real
	// network, so that races between a reply and a timer have a window.
	d += time.Duration(rand.Int64N(int64(500 * time.Microsecond)))
	if closed {
		return zero, errors.New("simnet: client closed")
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	if cut || c.srv.isolatedMember(c.member) {
		t := time.NewTimer(readTimeout)
		defer t.Stop()
		if deaf, _ := ctx.Value(deafKey{}).(bool); deaf {
			<-t.C
			return zero, errSimTransport
		}
		select {
		case <-t.C:
			return zero, errSimTransport
		case <-ctx.Done():
			return zero, fmt.Errorf("%w: %w", errSimTransport, ctx.Err())
		}
	}
	type result struct {
		v   T
		err error
	}
	var state atomic.Int32 // 0 in flight, 1 delivered, 2 abandoned
	reply := make(chan result, 1)
	c.srv.flight.Add(1)
	go func() {
		defer c.srv.flight.Done()
		time.Sleep(d)
		c.srv.gate()
		v, err := op()
		time.Sleep(d)
		if state.CompareAndSwap(0, 1) {
			reply <- result{v, err}
		} else if abandoned != nil {
			abandoned(v, err)
		}
	}()
	select {
	case r := <-reply:
		return r.v, r.err
	case <-ctx.Done():
		if state.CompareAndSwap(0, 2) {
			return zero, ctx.Err()
		}
		r := <-reply
		return r.v, r.err
	}
}

func (c *simClient) tryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	if err := driver.ValidateKey(key, 1<<16); err != nil {
		return distlock.Lease{}, err
	}
	if err := driver.ValidateTTL(ttl); err != nil {
		return distlock.Lease{}, err
	}
	start := time.Now()
	lease, err := roundTrip(ctx, c, func() (distlock.Lease, error) {
		return c.srv.table().TryLock(context.Background(), key, ttl)
	}, func(l distlock.Lease, err error) {
		if err == nil && !c.bugs.keepAbandoned {
			_ = c.srv.table().Unlock(context.Background(), l)
		}
	})
	if err == nil {
		// The server computed Expires from its own start; the client's is earlier.
		lease.Expires = start.Add(ttl)
		if !c.bugs.expiredLease && lease.Remaining() <= 0 {
			// The reply came after the ttl: the lease is worthless; release it.
			_, _ = roundTrip(context.Background(), c, func() (struct{}, error) {
				return struct{}{}, c.srv.table().Unlock(context.Background(), lease)
			}, nil)
			return distlock.Lease{}, fmt.Errorf("simnet: TryLock: the reply came %v after the ttl %v", -lease.Remaining(), ttl)
		}
	}
	return lease, c.mapErr(err)
}

func (c *simClient) mapErr(err error) error {
	if err != nil && c.bugs.errAsLocked && errors.Is(err, errSimTransport) {
		return fmt.Errorf("simnet mutant: %w", distlock.ErrLocked)
	}
	return err
}

func (c *simClient) renew(ctx context.Context, l distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	if err := driver.ValidateLease(l); err != nil {
		return l, err
	}
	if err := driver.ValidateTTL(ttl); err != nil {
		return l, err
	}
	start := time.Now()
	if !start.Before(l.Expires) && !c.bugs.localRenew && !c.bugs.staleRenew {
		return l, fmt.Errorf("simnet: Renew after the lease's Expires: %w", distlock.ErrNotHeld)
	}
	if c.bugs.localRenew && l.Remaining() > 0 {
		l.Expires = start.Add(ttl)
		return l, nil
	}
	if c.bugs.staleRenew && c.srv.isolatedMember(c.member) {
		// The isolated member still believes the lease is held, as it was when it
		// lost its peers.
		l.Expires = start.Add(ttl)
		return l, nil
	}
	if c.bugs.deafRenew {
		ctx = context.WithValue(ctx, deafKey{}, true)
	}
	if c.bugs.batchRenew {
		ctx = c.joinBatch(ctx)
	}
	next, err := roundTrip(ctx, c, func() (distlock.Lease, error) {
		tab := c.srv.table()
		next, err := tab.Renew(context.Background(), l, ttl)
		if err == nil && c.srv.bugs.renewShortens && ttl < l.Remaining() {
			shorten(tab, l, ttl)
		}
		return next, err
	}, nil)
	if err == nil {
		next.Expires = start.Add(ttl)
		if !c.bugs.expiredLease && next.Remaining() <= 0 {
			return l, fmt.Errorf("simnet: Renew: the reply came %v after the ttl %v", -next.Remaining(), ttl)
		}
	}
	return next, c.mapErr(err)
}

func (c *simClient) unlock(ctx context.Context, l distlock.Lease) error {
	if err := driver.ValidateLease(l); err != nil {
		return err
	}
	_, err := roundTrip(ctx, c, func() (struct{}, error) {
		return struct{}{}, c.srv.table().Unlock(context.Background(), l)
	}, nil)
	return c.mapErr(err)
}

// The methods wrap every error in a *distlock.OpError, as a backend does, around
// the cause (unwrapped from the table's own OpError).

func simErr(op, key string, err error) error {
	if err == nil {
		return nil
	}
	var oe *distlock.OpError
	if errors.As(err, &oe) {
		err = oe.Err
	}
	return &distlock.OpError{Backend: "simnet", Op: op, Key: key, Err: err}
}

func (c *simClient) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	l, err := c.tryLock(ctx, key, ttl)
	return l, simErr("TryLock", key, err)
}

func (c *simClient) Renew(ctx context.Context, l distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	next, err := c.renew(ctx, l, ttl)
	return next, simErr("Renew", l.Key, err)
}

func (c *simClient) Unlock(ctx context.Context, l distlock.Lease) error {
	return simErr("Unlock", l.Key, c.unlock(ctx, l))
}

func (c simFull) Wait(ctx context.Context, key string) error {
	return simErr("Wait", key, c.wait(ctx, key))
}

func (c simFull) Inspect(ctx context.Context, key string) (distlock.Holder, error) {
	h, err := c.inspect(ctx, key)
	return h, simErr("Inspect", key, err)
}

// simFull is a simClient whose table also waits and inspects.
type simFull struct{ *simClient }

func (c simFull) wait(ctx context.Context, key string) error {
	if err := driver.ValidateKey(key, 1<<16); err != nil {
		return err
	}
	c.mu.Lock()
	cut := c.cut
	c.mu.Unlock()
	if cut {
		<-ctx.Done()
		return fmt.Errorf("%w: %w", errSimTransport, ctx.Err())
	}
	return c.srv.table().(distlock.Waiter).Wait(ctx, key)
}

func (c simFull) inspect(ctx context.Context, key string) (distlock.Holder, error) {
	if err := driver.ValidateKey(key, 1<<16); err != nil {
		return distlock.Holder{}, err
	}
	return roundTrip(ctx, c.simClient, func() (distlock.Holder, error) {
		return c.srv.table().(distlock.Inspector).Inspect(context.Background(), key)
	}, nil)
}

// shorten makes the server free lease's key ttl from now, as a server whose renew
// sets the expiry (rather than extending it) would: the mutant renewShortens.
func shorten(tab distlock.Locker, l distlock.Lease, ttl time.Duration) {
	time.AfterFunc(ttl, func() {
		in, ok := tab.(interface{ Revoke(string) bool })
		h, err := tab.(distlock.Inspector).Inspect(context.Background(), l.Key)
		if ok && err == nil && h.Fence == l.Fence {
			in.Revoke(l.Key)
		}
	})
}

// simHarness returns a harness whose clients reach a fresh table (made by newTable)
// through simnet, with the given client and server bugs, and every fault.
func simHarness(newTable func() distlock.Locker, bugs clientBugs, sbugs serverBugs) conformance.Harness {
	srv := &simServer{tab: newTable(), fresh: newTable, bugs: sbugs}
	_, full := srv.tab.(distlock.Waiter)
	if _, ok := srv.tab.(distlock.Inspector); !ok {
		full = false
	}
	set := func(c *simClient, f func()) {
		c.mu.Lock()
		defer c.mu.Unlock()
		f()
	}
	caps := conformance.Capabilities{MaxKeyLen: 1 << 16}
	if bugs.session != 0 {
		caps.SessionExpiry = true // a crash ends the session: the server drops its locks
	}
	return conformance.Harness{
		NewClient: func(t testing.TB) conformance.Client {
			t.Cleanup(srv.flight.Wait)
			srv.mu.Lock()
			c := &simClient{srv: srv, bugs: bugs, member: srv.next % simMembers}
			srv.next++
			srv.mu.Unlock()
			var l distlock.Locker = c
			crash := func() { set(c, func() { c.closed = true }) }
			switch {
			case bugs.session != 0:
				ss := newSimSession(c, bugs.session == 2, bugs.session == 3)
				t.Cleanup(ss.wait)
				l, crash = ss, func() { set(c, func() { c.closed = true }); ss.crash() }
			case full:
				l = simFull{c}
			}
			return conformance.Client{
				Locker: l,
				Crash:  crash,
				Partition: func() func() {
					set(c, func() { c.cut = true })
					return func() { set(c, func() { c.cut = false }) }
				},
				Delay: func(d time.Duration) func() {
					set(c, func() { c.delay = d })
					return func() { set(c, func() { c.delay = 0 }) }
				},
				IsolateServer: func() func() { return srv.isolate(c.member) },
			}
		},
		Caps: caps,
		Faults: conformance.Faults{
			PauseServer: func(t *testing.T) func() {
				resume := srv.pause()
				t.Cleanup(resume)
				return resume
			},
			RestartServer: func(t *testing.T) { srv.outage(sbugs.restartForgets) },
			ChangeLeader:  func(t *testing.T) { srv.outage(sbugs.leaderLocal) },
			LoseMinority:  func(t *testing.T) { srv.outage(sbugs.unreplicated) },
		},
	}
}
