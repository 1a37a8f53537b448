package zklock_test

import (
	"io"
	"log"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/internal/faultproxy"
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
var quiet = zk.WithLogger(log.New(io.Discard, "", 0))

// connect returns a go-zookeeper connection to addrs with a session of timeout st,
// once it has its session. The caller closes it.
func connect(t testing.TB, addrs []string, st time.Duration) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect(addrs, st, quiet) // the event channel never blocks the library
	if err != nil {
		t.Fatalf("zk.Connect(%v): %v", addrs, err)
	}
	if err := waitState(conn, zk.StateHasSession, 30*time.Second); err != nil {
		conn.Close()
		t.Fatalf("zk.Connect(%v): %v", addrs, err)
	}
	return conn
}

// waitState polls conn until its state is want or d passes.
func waitState(conn *zk.Conn, want zk.State, d time.Duration) error {
	deadline := time.Now().Add(d)
	for conn.State() != want {
		if time.Now().After(deadline) {
			return &stateError{want: want, got: conn.State(), after: d}
		}
		time.Sleep(5 * time.Millisecond) // polling pace, bounded by the deadline
	}
	return nil
}

type stateError struct {
	want, got zk.State
	after     time.Duration
}

func (e *stateError) Error() string {
	return "connection state " + e.got.String() + ", not " + e.want.String() + ", after " + e.after.String()
}

// A client is one Locker with its own connection (its own session), optionally
// through fault proxies, one per server.
type client struct {
	l       *zklock.Locker
	conn    *zk.Conn
	proxies []*faultproxy.Proxy
}

// newClient connects to servers (through a fault proxy each when proxied) and makes
// a Locker with opts (SessionTimeout defaults to st, TickTime to the servers' tick).
// Everything is closed at t's cleanup: the connection first, so that the Locker's
// Close returns at once.
func newClient(t testing.TB, servers []string, st time.Duration, opts *zklock.Options, proxied bool) *client {
	t.Helper()
	c := &client{}
	addrs := servers
	if proxied {
		addrs = make([]string, len(servers))
		for i, s := range servers {
			p, err := faultproxy.New(s, nil)
			if err != nil {
				t.Fatalf("faultproxy.New(%s): %v", s, err)
			}
			t.Cleanup(func() { _ = p.Close() })
			c.proxies = append(c.proxies, p)
			addrs[i] = p.Addr()
		}
	}
	c.conn = connect(t, addrs, st)
	var o zklock.Options
	if opts != nil {
		o = *opts
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = st
	}
	if o.TickTime == 0 {
		o.TickTime = testenv.ZooKeeperTickTime // the servers' tick: leases of 2/3 st - 100ms
	}
	l, err := zklock.New(c.conn, &o)
	if err != nil {
		c.conn.Close()
		t.Fatalf("zklock.New: %v", err)
	}
	c.l = l
	t.Cleanup(func() {
		c.conn.Close()
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
func (c *client) isolate(t *testing.T) (heal func()) {
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
