package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/faultproxy"
)

// Faults inside a ZooKeeper ensemble: a node cut off from its peers while its
// clients still reach it (Isolate), a leader change (ChangeLeader), a node that
// loses its data and rejoins empty (LoseData).

// zkFaultTimeout bounds how long a fault method waits for the ensemble to serve.
const zkFaultTimeout = 60 * time.Second

// zkHold is the delay that holds a link's traffic during Isolate: bytes wait, in
// order, until the link heals, as a network partition holds TCP segments (nothing
// is lost or reset; each side notices only through its own timeouts).
const zkHold = 24 * time.Hour

// zkPeers are the links between the nodes of a proxied ensemble.
type zkPeers struct {
	// quorum[i][j] and election[i][j] carry node i's connections to node j's quorum
	// and election ports (nil when i == j).
	quorum, election [][]*faultproxy.Proxy
	// rewriters[j] fronts node j's election port (see electionRewriter).
	rewriters []*electionRewriter
}

// close closes every proxy and rewriter.
func (p *zkPeers) close() {
	for i := range p.quorum {
		for j := range p.quorum[i] {
			for _, px := range []*faultproxy.Proxy{p.quorum[i][j], p.election[i][j]} {
				if px != nil {
					_ = px.Close()
				}
			}
		}
	}
	for _, r := range p.rewriters {
		if r != nil {
			_ = r.Close()
		}
	}
}

// link returns the proxies that carry the connections between nodes i and j, in
// both directions.
func (p *zkPeers) link(i, j int) []*faultproxy.Proxy {
	return []*faultproxy.Proxy{p.quorum[i][j], p.election[i][j], p.quorum[j][i], p.election[j][i]}
}

// ZooKeeperProxiedEnsemble is ZooKeeperEnsemble, except that the nodes reach each
// other only through fault proxies: every node's zoo.cfg lists each peer at the
// address of a proxy of its own for that peer (one for the quorum port, one for the
// election port), so each directed link between two nodes can fail on its own.
// Clients reach the nodes directly, at their Addr. Isolate, PeerProxies and the
// other faults of Ensemble work on it.
//
// If DISTLOCK_ZK_ADDRS is set, it returns External servers, as ZooKeeperEnsemble
// does; Isolate then fails the test.
func (e *Env) ZooKeeperProxiedEnsemble(n int) (*Ensemble, error) {
	if os.Getenv(EnvZooKeeperAddrs) != "" {
		return e.ZooKeeperEnsemble(n)
	}
	if n < 2 {
		return nil, fmt.Errorf("testenv: ZooKeeperProxiedEnsemble(%d): an ensemble needs at least 2 nodes", n)
	}
	// Every port is chosen at once, so that no proxy takes a port meant for a node:
	// node j's quorum and election ports, then one per rewriter and per proxy.
	all, err := FreePorts(2*n + n + 2*n*(n-1))
	if err != nil {
		return nil, err
	}
	ports, spare := all[:2*n], all[2*n:]
	local := func(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
	next := func() string {
		port := spare[0]
		spare = spare[1:]
		return local(port)
	}
	p := &zkPeers{quorum: make([][]*faultproxy.Proxy, n), election: make([][]*faultproxy.Proxy, n)}
	fail := func(err error) (*Ensemble, error) {
		p.close()
		return nil, err
	}
	for j := range n {
		r, err := newElectionRewriter(next(), local(ports[2*j+1]))
		if err != nil {
			return fail(err)
		}
		p.rewriters = append(p.rewriters, r)
	}
	views := make([][]int, n)
	for i := range n {
		p.quorum[i] = make([]*faultproxy.Proxy, n)
		p.election[i] = make([]*faultproxy.Proxy, n)
		views[i] = append([]int(nil), ports...)
		for j := range n {
			if i == j {
				continue
			}
			q, err := faultproxy.New(local(ports[2*j]), &faultproxy.Options{ListenAddr: next()})
			if err != nil {
				return fail(err)
			}
			p.quorum[i][j] = q
			el, err := faultproxy.New(p.rewriters[j].Addr(), &faultproxy.Options{ListenAddr: next()})
			if err != nil {
				return fail(err)
			}
			p.election[i][j] = el
			views[i][2*j], err = proxyPort(q)
			if err != nil {
				return fail(err)
			}
			if views[i][2*j+1], err = proxyPort(el); err != nil {
				return fail(err)
			}
		}
	}
	nodes, err := e.startZooKeeperViews("zookeeper-proxied", views)
	if err != nil {
		return fail(err)
	}
	en := &Ensemble{Nodes: nodes, peers: p}
	// Stop the nodes before closing their links, so that none of them waits for a
	// peer while it shuts down; the Env stops them again (a no-op) and reports errors.
	e.Cleanup(func() {
		var wg sync.WaitGroup
		for _, s := range nodes {
			wg.Go(func() { _ = s.Stop() })
		}
		wg.Wait()
		p.close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), DefaultReadyTimeout)
	defer cancel()
	if err := en.WaitServing(ctx); err != nil {
		return nil, err
	}
	return en, nil
}

// proxyPort returns the port of p's listening address.
func proxyPort(p *faultproxy.Proxy) (int, error) {
	_, port, err := net.SplitHostPort(p.Addr())
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(port)
}

// Proxied reports whether the nodes reach each other through fault proxies (see
// ZooKeeperProxiedEnsemble).
func (en *Ensemble) Proxied() bool { return en.peers != nil }

// mustIndex fails t unless i indexes Nodes.
func (en *Ensemble) mustIndex(t testing.TB, op string, i int) {
	t.Helper()
	if i < 0 || i >= len(en.Nodes) {
		t.Fatalf("testenv: %s(%d): the ensemble has %d nodes (0 to %d)", op, i, len(en.Nodes), len(en.Nodes)-1)
	}
}

// NodeIndex returns the index in Nodes of the node whose client address is addr (as
// zk.Conn.Server reports it), or -1.
func (en *Ensemble) NodeIndex(addr string) int {
	for i, s := range en.Nodes {
		if s.Addr() == addr {
			return i
		}
	}
	return -1
}

// PeerProxies returns the fault proxies that carry the traffic between Nodes[i] and
// Nodes[j], in both directions (quorum and election connections): a test can delay
// one link, for example to make a follower lag. It fails t unless the ensemble came
// from ZooKeeperProxiedEnsemble.
func (en *Ensemble) PeerProxies(t testing.TB, i, j int) []*faultproxy.Proxy {
	t.Helper()
	if en.peers == nil {
		t.Fatalf("testenv: PeerProxies needs an ensemble from Env.ZooKeeperProxiedEnsemble")
	}
	en.mustIndex(t, "PeerProxies", i)
	en.mustIndex(t, "PeerProxies", j)
	if i == j {
		t.Fatalf("testenv: PeerProxies(%d, %d): a node has no link to itself", i, j)
	}
	return en.peers.link(i, j)
}

// Isolate cuts Nodes[i] off from its peers until the returned heal is called, or the
// test ends, while its clients still reach it: every byte between it and the other
// nodes is held, in both directions, on open and new connections, as in a network
// partition (nothing is reset or lost; after heal, held bytes arrive in order). It
// returns at once; the nodes notice through ZooKeeper's own timeouts: a follower
// loses its leader after syncLimit ticks without a packet and stops serving, an
// isolated leader steps down once a quorum has not answered for syncLimit ticks, and
// the others elect a leader (Leader tells when). It fails t unless the ensemble came
// from ZooKeeperProxiedEnsemble.
func (en *Ensemble) Isolate(t testing.TB, i int) (heal func()) {
	t.Helper()
	if en.peers == nil {
		t.Fatalf("testenv: Isolate needs an ensemble from Env.ZooKeeperProxiedEnsemble")
	}
	en.mustIndex(t, "Isolate", i)
	var links []*faultproxy.Proxy
	for j := range en.Nodes {
		if j != i {
			links = append(links, en.peers.link(i, j)...)
		}
	}
	for _, p := range links {
		p.Delay(zkHold)
	}
	var once sync.Once
	heal = func() {
		once.Do(func() {
			for _, p := range links {
				p.Heal()
			}
		})
	}
	t.Cleanup(heal)
	return heal
}

// ChangeLeader makes the ensemble elect another leader: it kills the current leader
// (SIGKILL, as a crash), waits until the other nodes have elected one of them, then
// starts the old leader again and returns the new leader once every node serves
// (the old one as a follower). It fails t on External servers or when the ensemble
// does not serve within a minute.
func (en *Ensemble) ChangeLeader(t testing.TB) *Server {
	t.Helper()
	for _, s := range en.Nodes {
		s.mustOwn(t, "ChangeLeader")
	}
	ctx, cancel := context.WithTimeout(context.Background(), zkFaultTimeout)
	defer cancel()
	old, err := en.Leader(ctx)
	if err != nil {
		t.Fatalf("testenv: ChangeLeader: %v", err)
	}
	old.Kill(t)
	// Leader looks at running nodes only, so the one elected now is not old; the
	// caller gets the leader once old serves again (the same one, unless the
	// ensemble elected again meanwhile).
	if _, err := en.Leader(ctx); err != nil {
		t.Fatalf("testenv: ChangeLeader: no new leader after killing %s: %v", old, err)
	}
	old.Restart(t)
	next, err := en.Leader(ctx)
	if err != nil {
		t.Fatalf("testenv: ChangeLeader: after restarting %s: %v", old, err)
	}
	if next == old {
		t.Fatalf("testenv: ChangeLeader: %s leads again after its restart", old)
	}
	return next
}

// LoseData makes Nodes[i] lose its data and rejoin the ensemble empty, as a machine
// whose disk was replaced does: it kills the node, deletes everything in its data
// directory except myid (snapshots, transaction logs, epochs), starts it again and
// returns once every node serves (the empty node has synchronised with the leader).
// The other nodes must form a quorum without it, as with any minority. It fails t
// on External servers.
func (en *Ensemble) LoseData(t testing.TB, i int) {
	t.Helper()
	en.mustIndex(t, "LoseData", i)
	s := en.Nodes[i]
	s.mustOwn(t, "LoseData")
	s.Kill(t)
	if err := wipeZooKeeperData(filepath.Join(s.Dir, "data")); err != nil {
		t.Fatalf("testenv: LoseData(%d): %v", i, err)
	}
	s.Restart(t)
	ctx, cancel := context.WithTimeout(context.Background(), zkFaultTimeout)
	defer cancel()
	if err := en.WaitServing(ctx); err != nil {
		t.Fatalf("testenv: LoseData(%d): %v", i, err)
	}
}

// wipeZooKeeperData removes everything in a node's data directory except myid.
func wipeZooKeeperData(dataDir string) error {
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Name() == "myid" {
			continue
		}
		errs = append(errs, os.RemoveAll(filepath.Join(dataDir, e.Name())))
	}
	return errors.Join(errs...)
}
