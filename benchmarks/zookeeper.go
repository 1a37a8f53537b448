package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/driver"
)

// zkNopLogger silences go-zookeeper's connection log.
type zkNopLogger struct{}

func (zkNopLogger) Printf(string, ...any) {}

// newZKConn connects to the ZooKeeper server at addr (through route) with the
// session timeout ttl.
func newZKConn(addr string, route Route, sessionTimeout time.Duration) (*zk.Conn, error) {
	a, err := route.Dial(addr)
	if err != nil {
		return nil, err
	}
	conn, _, err := zk.Connect([]string{a}, sessionTimeout, zk.WithLogger(zkNopLogger{}), zk.WithLogInfo(false))
	return conn, err
}

// zkPath turns a benchmark key (letters, digits, '-', '.', '/') into a node path
// under root.
func zkPath(root, key string) string {
	return root + "/" + strings.ReplaceAll(key, "/", "_")
}

// ZooKeeperSubjects returns the subjects on one ZooKeeper server: zklock, the peer
// go-zookeeper zk.Lock, and the floor. cfg.TTL is every session's timeout.
func ZooKeeperSubjects(addr string, cfg Config) []Subject {
	return []Subject{
		{
			Name: "zklock", Protocol: "zookeeper", Role: Ours,
			Wakeup: "watch on the predecessor (Waiter)", Waiter: true, Workloads: ours,
			Bound: cfg.TTL, BoundKind: "session timeout", Networked: true, Requests: zkCounter(addr),
			New: func(ctx context.Context, route Route) (Client, error) {
				return newZKLockClient(ctx, addr, route, cfg)
			},
		},
		{
			Name: "go-zookeeper zk.Lock", Protocol: "zookeeper", Role: Peer,
			Wakeup: "watch on the predecessor (queue)", Workloads: all,
			Bound: cfg.TTL, BoundKind: "session timeout", Networked: true,
			New: func(ctx context.Context, route Route) (Client, error) {
				conn, err := newZKConn(addr, route, cfg.TTL)
				if err != nil {
					return nil, err
				}
				return &zkLockClient{conn: conn}, nil
			},
			Note: "zk.Lock has no TryLock and no context: W1 calls Lock on a free key",
		},
		{
			Name: "zookeeper raw floor", Baseline: true, Protocol: "zookeeper", Role: Floor,
			Wakeup: "-", Workloads: w1Only, Networked: true,
			New: func(ctx context.Context, route Route) (Client, error) {
				conn, err := newZKConn(addr, route, cfg.TTL)
				if err != nil {
					return nil, err
				}
				c := &rawZK{conn: conn}
				if _, err := conn.Create(rawZKRoot, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
					conn.Close()
					return nil, err
				}
				return c, nil
			},
			Note: "create an ephemeral node, then delete it: 2 round trips; the fence would be its czxid",
		},
	}
}

// zkLockClient is go-zookeeper's zk.Lock (the recipe of ephemeral-sequential
// nodes). zk.Lock takes no context: Lock runs it on a goroutine, and when ctx ends
// first it leaves that goroutine to release the lock once it comes through (or to
// fail when Close closes the connection).
type zkLockClient struct {
	conn *zk.Conn
	wg   sync.WaitGroup
}

func (c *zkLockClient) lock(ctx context.Context, key string) (Held, error) {
	l := zk.NewLock(c.conn, zkPath("/bench-zklock", key), zk.WorldACL(zk.PermAll))
	res := make(chan error, 1)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		res <- l.Lock()
	}()
	select {
	case err := <-res:
		if err != nil {
			return nil, err
		}
		return zkLockHeld{l}, nil
	case <-ctx.Done():
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			if err := <-res; err == nil {
				_ = l.Unlock()
			}
		}()
		return nil, ctx.Err()
	}
}

func (c *zkLockClient) TryLock(ctx context.Context, key string) (Held, error) {
	return c.lock(ctx, key)
}
func (c *zkLockClient) Lock(ctx context.Context, key string) (Held, error) { return c.lock(ctx, key) }

func (c *zkLockClient) Close() error {
	c.conn.Close()
	c.wg.Wait()
	return nil
}

type zkLockHeld struct{ l *zk.Lock }

func (h zkLockHeld) Unlock(context.Context) error { return h.l.Unlock() }

// rawZKRoot is the parent of the floor's nodes.
const rawZKRoot = "/bench-raw"

// rawZK is the floor: create an ephemeral node, delete it.
type rawZK struct{ conn *zk.Conn }

func (c *rawZK) TryLock(ctx context.Context, key string) (Held, error) {
	p := zkPath(rawZKRoot, key)
	if _, err := c.conn.Create(p, []byte(driver.NewToken()), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		if errors.Is(err, zk.ErrNodeExists) {
			return nil, fmt.Errorf("%w: %w", ErrBusy, err)
		}
		return nil, err
	}
	return rawZKHeld{c.conn, p}, nil
}

func (c *rawZK) Lock(ctx context.Context, key string) (Held, error) {
	return nil, errors.New("the raw floor runs W1 only")
}

func (c *rawZK) Close() error {
	c.conn.Close()
	return nil
}

type rawZKHeld struct {
	conn *zk.Conn
	path string
}

func (h rawZKHeld) Unlock(context.Context) error { return h.conn.Delete(h.path, -1) }
