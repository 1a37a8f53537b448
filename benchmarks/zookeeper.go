package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"net"
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
func newZKConn(addr string, route Route, sessionTimeout time.Duration) (*zkConn, error) {
	a, err := route.Dial(addr)
	if err != nil {
		return nil, err
	}
	c := &zkConn{}
	conn, events, err := zk.Connect([]string{a}, sessionTimeout, zk.WithLogger(zkNopLogger{}), zk.WithLogInfo(false), zk.WithDialer(c.dial))
	if err != nil {
		return nil, err
	}
	c.Conn, c.events = conn, events
	return c, nil
}

// A zkConn is a *zk.Conn whose Close returns once go-zookeeper's goroutines of it
// have ended, as zklock.Session's does: go-zookeeper's own Close waits at most a
// second for the server's answer to the session's close, and its connection loop
// may outlive it (until the answer comes, or for up to 2/3 of the session timeout
// without one), which the leak check at the end of the matrix finds.
type zkConn struct {
	*zk.Conn
	events <-chan zk.Event // closed when the connection loop ends

	mu   sync.Mutex
	link net.Conn // the network connection dialed last
	shut bool     // Close ran: dial nothing more
}

func (c *zkConn) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	nc, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shut {
		_ = nc.Close()
		return nil, net.ErrClosed
	}
	c.link = nc
	return nc, nil
}

// Close closes the connection (go-zookeeper sends the session's close), then the
// network connection, so that the connection loop ends at once, and waits for it
// to end.
func (c *zkConn) Close() {
	c.Conn.Close()
	c.mu.Lock()
	c.shut = true
	link := c.link
	c.mu.Unlock()
	if link != nil {
		_ = link.Close()
	}
	for range c.events {
	}
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
	conn *zkConn
	wg   sync.WaitGroup
}

func (c *zkLockClient) lock(ctx context.Context, key string) (Held, error) {
	l := zk.NewLock(c.conn.Conn, zkPath("/bench-zklock", key), zk.WorldACL(zk.PermAll))
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
type rawZK struct{ conn *zkConn }

func (c *rawZK) TryLock(ctx context.Context, key string) (Held, error) {
	p := zkPath(rawZKRoot, key)
	if _, err := c.conn.Create(p, []byte(driver.NewToken()), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		if errors.Is(err, zk.ErrNodeExists) {
			return nil, fmt.Errorf("%w: %w", ErrBusy, err)
		}
		return nil, err
	}
	return rawZKHeld{c.conn.Conn, p}, nil
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
