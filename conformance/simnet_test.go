package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/conformance"
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
type simServer struct {
	mu      sync.Mutex
	resumed chan struct{} // nil while running; closed by resume
	flight  sync.WaitGroup
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
}

type simClient struct {
	inner  distlock.Locker
	srv    *simServer
	bugs   clientBugs
	mu     sync.Mutex
	cut    bool
	delay  time.Duration
	closed bool
}

var errSimTransport = errors.New("simnet: connection timed out")

// readTimeout bounds a call through a partition, as a client's socket timeout would.
const readTimeout = time.Second

func roundTrip[T any](ctx context.Context, c *simClient, op func() (T, error), abandoned func(T, error)) (T, error) {
	var zero T
	c.mu.Lock()
	cut, d, closed := c.cut, c.delay, c.closed
	c.mu.Unlock()
	if closed {
		return zero, errors.New("simnet: client closed")
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	if cut {
		t := time.NewTimer(readTimeout)
		defer t.Stop()
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

func (c *simClient) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	if err := distlock.ValidateKey(key, 1<<16); err != nil {
		return distlock.Lease{}, err
	}
	if err := distlock.ValidateTTL(ttl); err != nil {
		return distlock.Lease{}, err
	}
	start := time.Now()
	lease, err := roundTrip(ctx, c, func() (distlock.Lease, error) {
		return c.inner.TryLock(context.Background(), key, ttl)
	}, func(l distlock.Lease, err error) {
		if err == nil && !c.bugs.keepAbandoned {
			_ = c.inner.Unlock(context.Background(), l)
		}
	})
	if err == nil {
		// The server computed Expires from its own start; the client's is earlier.
		lease.Expires = start.Add(ttl)
	}
	return lease, c.mapErr(err)
}

func (c *simClient) mapErr(err error) error {
	if err != nil && c.bugs.errAsLocked && errors.Is(err, errSimTransport) {
		return fmt.Errorf("simnet mutant: %w", distlock.ErrLocked)
	}
	return err
}

func (c *simClient) Renew(ctx context.Context, l distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	if err := distlock.ValidateLease(l); err != nil {
		return l, err
	}
	if err := distlock.ValidateTTL(ttl); err != nil {
		return l, err
	}
	start := time.Now()
	if c.bugs.localRenew && l.Remaining() > 0 {
		l.Expires = start.Add(ttl)
		return l, nil
	}
	next, err := roundTrip(ctx, c, func() (distlock.Lease, error) {
		return c.inner.Renew(context.Background(), l, ttl)
	}, nil)
	if err == nil {
		next.Expires = start.Add(ttl)
	}
	return next, c.mapErr(err)
}

func (c *simClient) Unlock(ctx context.Context, l distlock.Lease) error {
	if err := distlock.ValidateLease(l); err != nil {
		return err
	}
	_, err := roundTrip(ctx, c, func() (struct{}, error) {
		return struct{}{}, c.inner.Unlock(context.Background(), l)
	}, nil)
	return c.mapErr(err)
}

// simFull is a simClient whose table also waits and inspects.
type simFull struct{ *simClient }

func (c simFull) Wait(ctx context.Context, key string) error {
	if err := distlock.ValidateKey(key, 1<<16); err != nil {
		return err
	}
	c.mu.Lock()
	cut := c.cut
	c.mu.Unlock()
	if cut {
		<-ctx.Done()
		return fmt.Errorf("%w: %w", errSimTransport, ctx.Err())
	}
	return c.inner.(distlock.Waiter).Wait(ctx, key)
}

func (c simFull) Inspect(ctx context.Context, key string) (distlock.Holder, error) {
	if err := distlock.ValidateKey(key, 1<<16); err != nil {
		return distlock.Holder{}, err
	}
	return roundTrip(ctx, c.simClient, func() (distlock.Holder, error) {
		return c.inner.(distlock.Inspector).Inspect(context.Background(), key)
	}, nil)
}

// simHarness returns a harness whose clients reach table through simnet, with the
// given client bugs, and every fault but RestartServer (an in-process table does not
// survive a restart).
func simHarness(table distlock.Locker, bugs clientBugs) conformance.Harness {
	srv := &simServer{}
	_, full := table.(distlock.Waiter)
	if _, ok := table.(distlock.Inspector); !ok {
		full = false
	}
	sim := func(l distlock.Locker) *simClient {
		switch c := l.(type) {
		case *simClient:
			return c
		case simFull:
			return c.simClient
		}
		panic(fmt.Sprintf("simnet: not a simnet client: %T", l))
	}
	set := func(c *simClient, f func()) {
		c.mu.Lock()
		defer c.mu.Unlock()
		f()
	}
	return conformance.Harness{
		NewClient: func(t *testing.T) distlock.Locker {
			t.Cleanup(srv.flight.Wait)
			c := &simClient{inner: table, srv: srv, bugs: bugs}
			if full {
				return simFull{c}
			}
			return c
		},
		Caps: conformance.Capabilities{MaxKeyLen: 1 << 16, Waiter: full, Inspector: full},
		Faults: conformance.Faults{
			Crash: func(t *testing.T, l distlock.Locker) { set(sim(l), func() { sim(l).closed = true }) },
			Partition: func(t *testing.T, l distlock.Locker) func() {
				c := sim(l)
				set(c, func() { c.cut = true })
				return func() { set(c, func() { c.cut = false }) }
			},
			Delay: func(t *testing.T, l distlock.Locker, d time.Duration) func() {
				c := sim(l)
				set(c, func() { c.delay = d })
				return func() { set(c, func() { c.delay = 0 }) }
			},
			PauseServer: func(t *testing.T) func() {
				resume := srv.pause()
				t.Cleanup(resume)
				return resume
			},
		},
	}
}
