package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	bsm "github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/redislock"
)

// bsmBackoff is bsm/redislock's retry interval in W2 and W3: the library has no
// default retry (Obtain makes one attempt), and its README's example retries every
// 100ms.
const bsmBackoff = 100 * time.Millisecond

// newRedisClient returns a go-redis client of the server at addr (through route),
// with go-redis' defaults.
func newRedisClient(addr string, route Route) (*redis.Client, error) {
	a, err := route.Dial(addr)
	if err != nil {
		return nil, err
	}
	return redis.NewClient(&redis.Options{Addr: a}), nil
}

// RedisSubjects returns the subjects on one Redis server: redislock, the peers
// redsync (one node) and bsm/redislock, and the floor.
func RedisSubjects(addr string, cfg Config) []Subject {
	return []Subject{
		{
			Name: "redislock", Protocol: "redis", Role: Ours,
			Wakeup: "pub/sub (Waiter)", Waiter: true, Workloads: ours,
			Bound: cfg.TTL, BoundKind: "ttl", Networked: true, Requests: redisCounter(addr),
			New: func(ctx context.Context, route Route) (Client, error) {
				return newRedisLockClient(addr, route, cfg)
			},
		},
		{
			Name: "redislock (ctx.Background)", Protocol: "redis", Role: Ours,
			Wakeup: "pub/sub (Waiter)", Waiter: true, Workloads: w1Only,
			Bound: cfg.TTL, BoundKind: "ttl", Networked: true,
			New: func(ctx context.Context, route Route) (Client, error) {
				c, err := newRedisLockClient(addr, route, cfg)
				if err != nil {
					return nil, err
				}
				return backgroundClient{c}, nil
			},
			Note: "calls get context.Background(), which redislock runs on the caller's goroutine (a cancellable context hands each command to a pooled worker goroutine)",
		},
		{
			Name: "redsync", Protocol: "redis", Role: Peer,
			Wakeup: "poll, random 50-250ms (default)", Workloads: all,
			Bound: cfg.TTL, BoundKind: "ttl", Networked: true,
			New: func(ctx context.Context, route Route) (Client, error) {
				return newRedsyncClient([]string{addr}, route, cfg.TTL)
			},
			Note: "go-redsync/redsync v4 on one node; default retry delay, tries unbounded (the context bounds Lock)",
		},
		{
			Name: "bsm/redislock", Protocol: "redis", Role: Peer,
			Wakeup: fmt.Sprintf("poll, every %v", bsmBackoff), Workloads: all,
			Bound: cfg.TTL, BoundKind: "ttl", Networked: true,
			New: func(ctx context.Context, route Route) (Client, error) {
				c, err := newRedisClient(addr, route)
				if err != nil {
					return nil, err
				}
				return &bsmClient{rdb: c, c: bsm.New(c), ttl: cfg.TTL}, nil
			},
			Note: fmt.Sprintf("Obtain with LinearBackoff(%v) to wait (the library's README example); no retry for TryLock", bsmBackoff),
		},
		{
			Name: "redis raw floor", Baseline: true, Protocol: "redis", Role: Floor,
			Wakeup: "-", Workloads: w1Only, Networked: true,
			New: func(ctx context.Context, route Route) (Client, error) {
				return newRawRedis([]string{addr}, route, cfg.TTL)
			},
			Note: "SET key token NX PX ttl, then an EVALSHA compare-and-delete: 2 round trips, no fence",
		},
		{
			Name: "redis raw floor + fence", Protocol: "redis", Role: Floor,
			Wakeup: "-", Workloads: w1Only, Networked: true,
			New: func(ctx context.Context, route Route) (Client, error) {
				return newFencedRedis([]string{addr}, route, cfg.TTL)
			},
			Note: "what redislock's protocol needs at least: " + fencedFloorNote(1),
		},
		{
			Name: "redis raw floor + fence + ctx", Protocol: "redis", Role: Floor,
			Wakeup: "-", Workloads: w1Only, Networked: true,
			New: func(ctx context.Context, route Route) (Client, error) {
				c, err := newFencedRedis([]string{addr}, route, cfg.TTL)
				if err != nil {
					return nil, err
				}
				c.ctxBound = true
				return c, nil
			},
			Note: "what redislock's protocol needs at least under the contract's rule that a call returns once its context is done: the fenced floor with each script on a goroutine of its own, the caller waiting for its reply or its context (go-redis alone waits for the reply until ReadTimeout, as redsync and bsm/redislock do)",
		},
	}
}

// newRedisLockClient returns a redislock.Locker on its own go-redis client.
func newRedisLockClient(addr string, route Route, cfg Config) (*lockerClient, error) {
	c, err := newRedisClient(addr, route)
	if err != nil {
		return nil, err
	}
	l, err := redislock.New(c, nil)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return &lockerClient{l: l, ttl: cfg.TTL, close: closeBoth(l.Close, c.Close)}, nil
}

// backgroundClient calls its Client with context.Background(), ignoring the
// caller's context.
type backgroundClient struct{ Client }

func (c backgroundClient) TryLock(_ context.Context, key string) (Held, error) {
	h, err := c.Client.TryLock(context.Background(), key)
	if err != nil {
		return nil, err
	}
	return backgroundHeld{h}, nil
}

type backgroundHeld struct{ Held }

func (h backgroundHeld) Unlock(context.Context) error { return h.Held.Unlock(context.Background()) }

// redsyncClient is go-redsync/redsync v4 over one go-redis client per node.
type redsyncClient struct {
	clients []*redis.Client
	rs      *redsync.Redsync
	ttl     time.Duration
}

func newRedsyncClient(addrs []string, route Route, ttl time.Duration) (*redsyncClient, error) {
	c := &redsyncClient{ttl: ttl}
	var pools []redsyncredis.Pool
	for _, a := range addrs {
		rc, err := newRedisClient(a, route)
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		c.clients = append(c.clients, rc)
		pools = append(pools, goredis.NewPool(rc))
	}
	c.rs = redsync.New(pools...)
	return c, nil
}

func (c *redsyncClient) mutex(key string) *redsync.Mutex {
	return c.rs.NewMutex(key, redsync.WithExpiry(c.ttl), redsync.WithTries(math.MaxInt32))
}

func (c *redsyncClient) TryLock(ctx context.Context, key string) (Held, error) {
	m := c.mutex(key)
	if err := m.TryLockContext(ctx); err != nil {
		var taken *redsync.ErrTaken
		if errors.As(err, &taken) || errors.Is(err, redsync.ErrFailed) {
			return nil, fmt.Errorf("%w: %w", ErrBusy, err)
		}
		return nil, err
	}
	return redsyncHeld{m}, nil
}

func (c *redsyncClient) Lock(ctx context.Context, key string) (Held, error) {
	m := c.mutex(key)
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return redsyncHeld{m}, nil
}

func (c *redsyncClient) Close() error {
	var errs []error
	for _, rc := range c.clients {
		errs = append(errs, rc.Close())
	}
	return errors.Join(errs...)
}

type redsyncHeld struct{ m *redsync.Mutex }

func (h redsyncHeld) Unlock(ctx context.Context) error {
	ok, err := h.m.UnlockContext(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("redsync: Unlock found the lock gone")
	}
	return nil
}

// bsmClient is bsm/redislock.
type bsmClient struct {
	rdb *redis.Client
	c   *bsm.Client
	ttl time.Duration
}

func (c *bsmClient) TryLock(ctx context.Context, key string) (Held, error) {
	l, err := c.c.Obtain(ctx, key, c.ttl, nil)
	if err != nil {
		if errors.Is(err, bsm.ErrNotObtained) {
			return nil, fmt.Errorf("%w: %w", ErrBusy, err)
		}
		return nil, err
	}
	return bsmHeld{l}, nil
}

func (c *bsmClient) Lock(ctx context.Context, key string) (Held, error) {
	l, err := c.c.Obtain(ctx, key, c.ttl, &bsm.Options{RetryStrategy: bsm.LinearBackoff(bsmBackoff)})
	if err != nil {
		return nil, err
	}
	return bsmHeld{l}, nil
}

func (c *bsmClient) Close() error { return c.rdb.Close() }

type bsmHeld struct{ l *bsm.Lock }

func (h bsmHeld) Unlock(ctx context.Context) error { return h.l.Release(ctx) }

// rawRedis is the floor: SET NX PX to acquire, a compare-and-delete script to
// release, on every node at once (a quorum of them must answer yes). Fenced, it is
// the fenced floor: a script that SETs NX PX and INCRs the key's counter, and a
// compare-and-delete that PUBLISHes the release.
type rawRedis struct {
	clients []*redis.Client
	ttl     time.Duration
	fenced  bool
	// ctxBound: each call returns once its context is done (see ctxBound), on
	// one server.
	ctxBound bool
}

// rawRelease deletes KEYS[1] if it holds ARGV[1].
var rawRelease = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// fencedAcquire sets KEYS[1] to ARGV[1] for ARGV[2] ms if it is free, and then
// returns the incremented counter KEYS[2] (the fence); 0 if KEYS[1] was held.
var fencedAcquire = redis.NewScript(`if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then return redis.call("INCR", KEYS[2]) end return 0`)

// fencedRelease deletes KEYS[1] if it holds ARGV[1] and publishes the release on
// channel ARGV[2].
var fencedRelease = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then redis.call("DEL", KEYS[1]) redis.call("PUBLISH", ARGV[2], ARGV[1]) return 1 end return 0`)

// newFencedRedis returns the fenced floor on the servers at addrs.
func newFencedRedis(addrs []string, route Route, ttl time.Duration) (*rawRedis, error) {
	c, err := newRawRedis(addrs, route, ttl)
	if err != nil {
		return nil, err
	}
	c.fenced = true
	return c, nil
}

// fencedFloorNote describes the fenced floor on n servers.
func fencedFloorNote(n int) string {
	where := "2 round trips"
	if n > 1 {
		where = fmt.Sprintf("on all %d masters in parallel, quorum %d: 2 parallel round trips", n, n/2+1)
	}
	return "one script that sets the lock (SET NX PX) and increments a fence counter (INCR), then one that compares, deletes and PUBLISHes the release; " + where
}

func newRawRedis(addrs []string, route Route, ttl time.Duration) (*rawRedis, error) {
	c := &rawRedis{ttl: ttl}
	for _, a := range addrs {
		rc, err := newRedisClient(a, route)
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		c.clients = append(c.clients, rc)
	}
	return c, nil
}

// onAll runs f on every client, in parallel when there are several, and returns
// how many answered true and the errors. With ctxBound (one client) it returns
// ctx's error as soon as ctx is done (see ctxBound).
func (c *rawRedis) onAll(ctx context.Context, f func(*redis.Client) (bool, error)) (int, error) {
	if len(c.clients) == 1 {
		one := func() (bool, error) { return f(c.clients[0]) }
		var ok bool
		var err error
		if c.ctxBound {
			ok, err = ctxBound(ctx, one)
		} else {
			ok, err = one()
		}
		if ok {
			return 1, err
		}
		return 0, err
	}
	type res struct {
		ok  bool
		err error
	}
	ch := make(chan res, len(c.clients))
	for _, rc := range c.clients {
		go func() {
			ok, err := f(rc)
			ch <- res{ok, err}
		}()
	}
	n := 0
	var errs []error
	for range c.clients {
		r := <-ch
		if r.ok {
			n++
		}
		errs = append(errs, r.err)
	}
	return n, errors.Join(errs...)
}

func (c *rawRedis) TryLock(ctx context.Context, key string) (Held, error) {
	token := driver.NewToken()
	n, err := c.onAll(ctx, func(rc *redis.Client) (bool, error) {
		if c.fenced {
			f, err := fencedAcquire.Run(ctx, rc, []string{key, key + ":fence"}, token, c.ttl.Milliseconds()).Int64()
			return f > 0, err
		}
		return rc.SetNX(ctx, key, token, c.ttl).Result()
	})
	h := &rawRedisHeld{c: c, key: key, token: token}
	if n < len(c.clients)/2+1 {
		_ = h.Unlock(context.WithoutCancel(ctx))
		if err != nil {
			return nil, err
		}
		return nil, ErrBusy
	}
	return h, nil
}

func (c *rawRedis) Lock(ctx context.Context, key string) (Held, error) {
	return nil, errors.New("the raw floor runs W1 only")
}

func (c *rawRedis) Close() error {
	var errs []error
	for _, rc := range c.clients {
		errs = append(errs, rc.Close())
	}
	return errors.Join(errs...)
}

type rawRedisHeld struct {
	c          *rawRedis
	key, token string
}

func (h *rawRedisHeld) Unlock(ctx context.Context) error {
	n, err := h.c.onAll(ctx, func(rc *redis.Client) (bool, error) {
		if h.c.fenced {
			v, err := fencedRelease.Run(ctx, rc, []string{h.key}, h.token, h.key+":released").Int()
			return v == 1, err
		}
		v, err := rawRelease.Run(ctx, rc, []string{h.key}, h.token).Int()
		return v == 1, err
	})
	if err != nil {
		return err
	}
	if n < len(h.c.clients)/2+1 {
		return fmt.Errorf("released on %d of %d nodes", n, len(h.c.clients))
	}
	return nil
}

// ctxBound runs f on a goroutine of its own and returns its result, or ctx's
// error as soon as ctx is done: the least that a client of go-redis does to
// return once its context is done (go-redis does not interrupt a command that
// waits for its reply). f's late result is dropped. With a context that is
// never done, f runs on the caller's goroutine.
func ctxBound[T any](ctx context.Context, f func() (T, error)) (T, error) {
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
		var zero T
		return zero, ctx.Err()
	}
}
