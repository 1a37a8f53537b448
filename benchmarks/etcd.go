package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/etcdlock"
)

// newEtcdClient returns a clientv3.Client of the member at addr (through route).
func newEtcdClient(addr string, route Route) (*clientv3.Client, error) {
	a, err := route.Dial(addr)
	if err != nil {
		return nil, err
	}
	return clientv3.New(clientv3.Config{
		Endpoints:            []string{a},
		DialTimeout:          2 * time.Second,
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
		Logger:               zap.NewNop(),
	})
}

// wholeSeconds rounds d up to whole seconds, at least 1: an etcd lease TTL.
func wholeSeconds(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}

// EtcdSubjects returns the subjects on one etcd member: etcdlock, the peer
// concurrency.Mutex, and the floor.
func EtcdSubjects(addr string, cfg Config) []Subject {
	return []Subject{
		{
			Name: "etcdlock", Protocol: "etcd", Role: Ours,
			Wakeup: "watch (Waiter)", Waiter: true, Workloads: ours,
			Bound: cfg.TTL, BoundKind: "ttl", Networked: true, Requests: etcdCounter(addr),
			New: func(ctx context.Context, route Route) (Client, error) {
				cli, err := newEtcdClient(addr, route)
				if err != nil {
					return nil, err
				}
				l, err := etcdlock.New(cli, nil)
				if err != nil {
					_ = cli.Close()
					return nil, err
				}
				return &lockerClient{l: l, ttl: cfg.TTL, close: closeBoth(l.Close, cli.Close)}, nil
			},
			Note: "a lease per held key, reused from a pool of up to 64 spare leases per Locker (Unlock keeps the lease; TTL in whole seconds)",
		},
		{
			Name: "etcd concurrency.Mutex", Protocol: "etcd", Role: Peer,
			Wakeup: "watch on the predecessor (queue)", Workloads: all,
			Bound: time.Duration(wholeSeconds(cfg.TTL)) * time.Second, BoundKind: "session ttl", Networked: true,
			New: func(ctx context.Context, route Route) (Client, error) {
				return newEtcdMutexClient(ctx, addr, route, wholeSeconds(cfg.TTL))
			},
			Note: "one session (lease, kept alive in the background) per client, shared by its mutexes",
		},
		{
			Name: "etcd raw floor", Baseline: true, Protocol: "etcd", Role: Floor,
			Wakeup: "-", Workloads: w1Only, Networked: true,
			New: func(ctx context.Context, route Route) (Client, error) {
				cli, err := newEtcdClient(addr, route)
				if err != nil {
					return nil, err
				}
				return &rawEtcd{cli: cli}, nil
			},
			Note: "Txn put-if-absent, then a Txn delete-if-unchanged: 2 round trips, no lease (no expiry); the fence is the create revision",
		},
		{
			Name: "etcd raw floor + lease", Protocol: "etcd", Role: Floor,
			Wakeup: "-", Workloads: w1Only, Networked: true,
			New: func(ctx context.Context, route Route) (Client, error) {
				return newLeasedEtcd(ctx, addr, route, wholeSeconds(cfg.TTL))
			},
			Note: "what etcdlock's protocol needs at least: the raw floor with the key on a lease (one per client, granted once and kept alive in the background, as a Mutex's session), so that it expires",
		},
	}
}

// etcdMutexClient is go.etcd.io/etcd/client/v3/concurrency.Mutex on one session.
type etcdMutexClient struct {
	cli *clientv3.Client
	s   *concurrency.Session
}

func newEtcdMutexClient(ctx context.Context, addr string, route Route, ttlSecs int) (*etcdMutexClient, error) {
	cli, err := newEtcdClient(addr, route)
	if err != nil {
		return nil, err
	}
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(ttlSecs), concurrency.WithContext(ctx))
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	return &etcdMutexClient{cli: cli, s: s}, nil
}

func (c *etcdMutexClient) TryLock(ctx context.Context, key string) (Held, error) {
	m := concurrency.NewMutex(c.s, "bench-mutex/"+key)
	if err := m.TryLock(ctx); err != nil {
		if errors.Is(err, concurrency.ErrLocked) {
			return nil, fmt.Errorf("%w: %w", ErrBusy, err)
		}
		return nil, err
	}
	return etcdMutexHeld{m}, nil
}

func (c *etcdMutexClient) Lock(ctx context.Context, key string) (Held, error) {
	m := concurrency.NewMutex(c.s, "bench-mutex/"+key)
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return etcdMutexHeld{m}, nil
}

// Close stops the session's keepalive without revoking its lease (a killed
// holder's revoke could only time out), then closes the client.
func (c *etcdMutexClient) Close() error {
	c.s.Orphan()
	return c.cli.Close()
}

type etcdMutexHeld struct{ m *concurrency.Mutex }

func (h etcdMutexHeld) Unlock(ctx context.Context) error { return h.m.Unlock(ctx) }

// rawEtcd is the floor: a put-if-absent transaction and a delete-if-unchanged
// transaction; with a lease (newLeasedEtcd), the put puts the key on it.
type rawEtcd struct {
	cli   *clientv3.Client
	lease clientv3.LeaseID // 0: none
}

// newLeasedEtcd returns the raw floor with a lease of ttlSecs, granted once and
// kept alive in the background until Close.
func newLeasedEtcd(ctx context.Context, addr string, route Route, ttlSecs int) (*rawEtcd, error) {
	cli, err := newEtcdClient(addr, route)
	if err != nil {
		return nil, err
	}
	g, err := cli.Grant(ctx, int64(ttlSecs))
	if err == nil {
		var ka <-chan *clientv3.LeaseKeepAliveResponse
		if ka, err = cli.KeepAlive(context.WithoutCancel(ctx), g.ID); err == nil {
			go func() {
				for range ka { // ends when the client closes
				}
			}()
		}
	}
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	return &rawEtcd{cli: cli, lease: g.ID}, nil
}

func (c *rawEtcd) TryLock(ctx context.Context, key string) (Held, error) {
	k := "bench-raw/" + key
	var opts []clientv3.OpOption
	if c.lease != 0 {
		opts = append(opts, clientv3.WithLease(c.lease))
	}
	resp, err := c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, driver.NewToken(), opts...)).
		Commit()
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		return nil, ErrBusy
	}
	return rawEtcdHeld{c.cli, k, resp.Header.Revision}, nil
}

func (c *rawEtcd) Lock(ctx context.Context, key string) (Held, error) {
	return nil, errors.New("the raw floor runs W1 only")
}

func (c *rawEtcd) Close() error { return c.cli.Close() }

type rawEtcdHeld struct {
	cli *clientv3.Client
	key string
	rev int64
}

func (h rawEtcdHeld) Unlock(ctx context.Context) error {
	resp, err := h.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(h.key), "=", h.rev)).
		Then(clientv3.OpDelete(h.key)).
		Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return errors.New("etcd raw floor: the key changed")
	}
	return nil
}
