package etcdlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

var (
	etcdSrv     *testenv.Server      // a single-member cluster
	etcdCluster *testenv.EtcdCluster // a 3-member cluster, peer traffic through proxies (Isolate)
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(env *testenv.Env) error {
		var err error
		if etcdSrv, err = env.Etcd(); err != nil {
			return err
		}
		etcdCluster, err = env.EtcdProxiedCluster(3)
		return err
	})
}

// rttCounter counts the requests a client sends: unary calls, and messages sent on
// streams (a watch creation, a keepalive). Each is one round trip to the server.
type rttCounter struct{ n atomic.Int64 }

func (c *rttCounter) Load() int64 { return c.n.Load() }

func (c *rttCounter) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			c.n.Add(1)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, err
			}
			return &countingStream{ClientStream: s, c: c}, nil
		}),
	}
}

type countingStream struct {
	grpc.ClientStream
	c *rttCounter
}

func (s *countingStream) SendMsg(m any) error {
	s.c.n.Add(1)
	return s.ClientStream.SendMsg(m)
}

// newClient returns a clientv3.Client of endpoints, closed when the test ends. It
// notices a dead connection within about 2s and redials at least every second, so
// that it recovers quickly once a fault heals. A non-nil counter counts its round
// trips.
func newClient(tb testing.TB, endpoints []string, counter *rttCounter) *clientv3.Client {
	tb.Helper()
	dopts := []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
		MinConnectTimeout: time.Second,
	})}
	if counter != nil {
		dopts = append(dopts, counter.dialOptions()...)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          2 * time.Second,
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
		DialOptions:          dopts,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		tb.Fatalf("clientv3.New(%v): %v", endpoints, err)
	}
	var once sync.Once
	tb.Cleanup(func() { once.Do(func() { cli.Close() }) })
	return cli
}

// newLocker returns a Locker on cli, closed when the test ends (before cli, whose
// cleanup was registered first).
func newLocker(tb testing.TB, cli *clientv3.Client, opts *etcdlock.Options) *etcdlock.Locker {
	tb.Helper()
	l, err := etcdlock.New(cli, opts)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, l.Close()) })
	return l
}

// ctxFor returns a context that ends after d or with the test.
func ctxFor(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(tb.Context(), d)
	tb.Cleanup(cancel)
	return ctx
}
