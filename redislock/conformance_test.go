package redislock_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/faultproxy"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/redislock"
)

// proxies starts one fault proxy in front of each address, closed at t's cleanup,
// and returns them with a map from server address to proxy address.
func proxies(t testing.TB, addrs []string) ([]*faultproxy.Proxy, map[string]string) {
	t.Helper()
	ps := make([]*faultproxy.Proxy, len(addrs))
	route := make(map[string]string, len(addrs))
	for i, a := range addrs {
		p, err := faultproxy.New(a, nil)
		if err != nil {
			t.Fatalf("harness: faultproxy.New(%s): %v", a, err)
		}
		t.Cleanup(func() { _ = p.Close() })
		ps[i] = p
		route[a] = p.Addr()
	}
	return ps, route
}

// routeDialer dials through the proxy that route names for each server address, so
// that every connection a client opens (including those to Cluster nodes it learns of
// from the server) passes through the client's own proxies.
func routeDialer(route map[string]string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if p, ok := route[addr]; ok {
			addr = p
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
}

// harness returns a Harness whose clients come from newClient, each behind fault
// proxies of its own (one per server) for Crash, Partition and Delay, with
// PauseServer and RestartServer acting on servers.
func harness(servers []*testenv.Server, newClient func(t testing.TB, route map[string]string) redis.UniversalClient, afterRestart func(t *testing.T)) conformance.Harness {
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	return conformance.Harness{
		NewClient: func(t testing.TB) conformance.Client {
			ps, route := proxies(t, addrs)
			c := newClient(t, route)
			// Registered after the proxies' cleanups, so it runs before them.
			t.Cleanup(func() { _ = c.Close() })
			warmUp(t, c)
			l, err := redislock.New(c, nil)
			if err != nil {
				t.Fatalf("harness: redislock.New: %v", err)
			}
			t.Cleanup(func() { _ = l.Close() }) // before the client closes
			return conformance.Client{
				Locker: l,
				Crash:  func() { _ = c.Close() },
				Partition: func() func() {
					for _, p := range ps {
						p.Blackhole()
					}
					return func() {
						for _, p := range ps {
							p.Heal()
						}
					}
				},
				Delay: func(d time.Duration) func() {
					for _, p := range ps {
						p.Delay(d)
					}
					return func() {
						for _, p := range ps {
							p.Delay(0)
						}
					}
				},
			}
		},
		Caps: conformance.Capabilities{MaxKeyLen: redislock.MaxKeyLen},
		Faults: conformance.Faults{
			PauseServer: func(t *testing.T) func() {
				for _, s := range servers {
					s.Pause(t)
				}
				return func() {
					for _, s := range servers {
						s.Resume(t)
					}
				}
			},
			RestartServer: func(t *testing.T) {
				for _, s := range servers {
					s.Restart(t)
				}
				if afterRestart != nil {
					afterRestart(t)
				}
			},
		},
	}
}

// warmUp opens c's connections (to every master of a Cluster) and loads its view of
// the topology, as in a process that has been running for a while. Without it the
// first request of a new Cluster client pays for discovering the cluster and
// connecting, several round trips, each of which a Delay fault slows down.
func warmUp(t testing.TB, c redis.UniversalClient) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			return m.Ping(ctx).Err()
		})
	} else {
		err = c.Ping(ctx).Err()
	}
	if err == nil {
		// A keyed command makes a Cluster client load the servers' COMMAND table,
		// which it needs to route scripts.
		if err = c.Exists(ctx, "warm-up").Err(); errors.Is(err, redis.Nil) {
			err = nil
		}
	}
	if err != nil {
		t.Fatalf("harness: warm up a new client: %v", err)
	}
}

func TestConformance(t *testing.T) {
	conformance.Run(t, harness([]*testenv.Server{redisSrv},
		func(t testing.TB, route map[string]string) redis.UniversalClient {
			return redis.NewClient(&redis.Options{
				Addr:   redisSrv.Addr(),
				Dialer: routeDialer(route),
			})
		}, nil))
}

func TestConformanceCluster(t *testing.T) {
	conformance.Run(t, harness(cluster.Nodes,
		func(t testing.TB, route map[string]string) redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{
				Addrs:  cluster.Addrs(),
				Dialer: routeDialer(route),
			})
		},
		func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			if err := cluster.WaitOK(ctx); err != nil {
				t.Fatalf("harness: cluster after restart: %v", err)
			}
		}))
}

func TestConformanceSentinel(t *testing.T) {
	conformance.Run(t, harness([]*testenv.Server{failoverSrv},
		func(t testing.TB, route map[string]string) redis.UniversalClient {
			// The client asks the sentinel for the master's address and dials it
			// through its proxy; its connections to the sentinel are not proxied.
			return redis.NewFailoverClient(&redis.FailoverOptions{
				MasterName:    sentinelMaster,
				SentinelAddrs: []string{sentinelSrv.Addr()},
				Dialer:        routeDialer(route),
			})
		}, nil))
}
