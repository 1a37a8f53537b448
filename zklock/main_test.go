package zklock_test

import (
	"context"
	"io"
	"log"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/faultproxy"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/zklock"
)

// Servers of this package's tests, started once by TestMain.
var (
	zkSrv *testenv.Server // standalone: conformance, unit tests, benchmarks
	// zkEns has 3 nodes that reach each other through fault proxies
	// (testenv.ZooKeeperProxiedEnsemble): conformance, leader kill, isolation.
	zkEns *testenv.Ensemble
	// zkEnv starts servers that a test needs for itself.
	zkEnv *testenv.Env
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(env *testenv.Env) error {
		zkEnv = env
		var err error
		if zkSrv, err = env.ZooKeeper(); err != nil {
			return err
		}
		zkEns, err = env.ZooKeeperProxiedEnsemble(3)
		return err
	})
}

// sessionTimeout is the session timeout of the tests' clients (the servers grant
// anything from 400ms to 30s): long enough that a loaded machine does not expire a
// healthy session, short enough that expiry tests take seconds.
const sessionTimeout = 2 * time.Second

// quiet keeps go-zookeeper's connection log out of the test output.
var quiet = &zklock.ConnectOptions{ZK: []func(*zk.Conn){zk.WithLogger(log.New(io.Discard, "", 0))}}

// connectSession returns a Session with addrs, asking for the session timeout st,
// once it has its session. The caller closes it.
func connectSession(t testing.TB, addrs []string, st time.Duration) *zklock.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := zklock.Connect(ctx, addrs, st, quiet)
	require.NoError(t, err)
	return s
}

// connect returns a go-zookeeper connection to addrs with a session of timeout st,
// once it has its session, for a test to look at the servers. The caller closes it.
func connect(t testing.TB, addrs []string, st time.Duration) *zk.Conn {
	t.Helper()
	return connectSession(t, addrs, st).Conn()
}

// requireState waits until conn's state is want, for at most d.
func requireState(t testing.TB, conn *zk.Conn, want zk.State, d time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return conn.State() == want }, d, 5*time.Millisecond,
		"connection state %v, not %v, after %v", conn.State(), want, d)
}

// A client is one Locker with its own Session, optionally through fault proxies, one
// per server.
type client struct {
	l       *zklock.Locker
	sess    *zklock.Session
	conn    *zk.Conn // sess.Conn()
	proxies []*faultproxy.Proxy
}

// newClient connects to servers (through a fault proxy each when proxied), asking
// for the session timeout st, and makes a Locker with opts (TickTime defaults to the
// servers' tick). Everything is closed at t's cleanup: the Session first, so that the
// Locker's Close returns at once.
func newClient(t testing.TB, servers []string, st time.Duration, opts *zklock.Options, proxied bool) *client {
	t.Helper()
	c := &client{}
	addrs := servers
	if proxied {
		addrs = make([]string, len(servers))
		for i, s := range servers {
			p, err := faultproxy.New(s, nil)
			require.NoError(t, err, "faultproxy.New(%s)", s)
			t.Cleanup(func() { _ = p.Close() })
			c.proxies = append(c.proxies, p)
			addrs[i] = p.Addr()
		}
	}
	c.sess = connectSession(t, addrs, st)
	c.conn = c.sess.Conn()
	var o zklock.Options
	if opts != nil {
		o = *opts
	}
	if o.TickTime == 0 {
		o.TickTime = testenv.ZooKeeperTickTime // the servers' tick: leases of 2/3 st - 100ms
	}
	l, err := zklock.New(c.sess, &o)
	if err != nil {
		c.sess.Close()
		t.Fatalf("zklock.New: %v", err)
	}
	c.l = l
	t.Cleanup(func() {
		c.sess.Close()
		_ = l.Close()
	})
	return c
}

func (c *client) cut() {
	for _, p := range c.proxies {
		p.Cut()
	}
}

func (c *client) blackhole() {
	for _, p := range c.proxies {
		p.Blackhole()
	}
}

func (c *client) heal() {
	for _, p := range c.proxies {
		p.Heal()
	}
}

func (c *client) delay(d time.Duration) {
	for _, p := range c.proxies {
		p.Delay(d)
	}
}

// node returns the index in zkEns.Nodes of the server that the client is connected
// to (through its fault proxy, if it has them), or -1.
func (c *client) node() int {
	addr := c.conn.Server()
	for _, p := range c.proxies {
		if p.Addr() == addr {
			addr = p.Target()
		}
	}
	return zkEns.NodeIndex(addr)
}

// isolate cuts the ensemble node that the client is connected to off from its peers,
// while the client still reaches it (testenv's Ensemble.Isolate), and returns the
// heal. A client that knows other nodes reconnects to one of them once the isolated
// node notices that it lost the leader and drops its clients; its session survives.
func (c *client) isolate(t testing.TB) (heal func()) {
	t.Helper()
	i := c.node()
	if i < 0 {
		t.Fatalf("isolate: the client's server %s is not a node of the ensemble", c.conn.Server())
	}
	return zkEns.Isolate(t, i)
}

// standaloneAddrs and ensembleAddrs are the servers of the two deployments.
func standaloneAddrs() []string { return []string{zkSrv.Addr()} }
func ensembleAddrs() []string   { return zkEns.Addrs() }
