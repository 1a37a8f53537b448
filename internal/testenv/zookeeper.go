package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EnvZooKeeperAddrs is a comma-separated list of ZooKeeper servers (host:port) that
// testenv does not start (for example, started with docker-compose): Env.ZooKeeper
// uses the first, Env.ZooKeeperEnsemble(n) the first n.
const EnvZooKeeperAddrs = "DISTLOCK_ZK_ADDRS"

// ZooKeeper timing of the servers testenv starts. A small tick makes session expiry
// take about a second instead of tens of seconds: the server grants a client any
// session timeout between ZooKeeperMinSessionTimeout and ZooKeeperMaxSessionTimeout.
const (
	ZooKeeperTickTime          = 200 * time.Millisecond
	ZooKeeperMinSessionTimeout = 400 * time.Millisecond
	ZooKeeperMaxSessionTimeout = 30 * time.Second
)

// zkCommandTimeout bounds one four-letter-word command.
const zkCommandTimeout = 2 * time.Second

// Where the Debian package zookeeper installs its jars and Java.
var (
	zkJarCandidates   = []string{"/usr/share/java", "/usr/share/zookeeper", "/usr/share/zookeeper/lib"}
	slf4jCandidates   = []string{"/usr/share/java"}
	javaBinCandidates = []string{"/usr/lib/jvm/*/bin"}
)

// ZooKeeper returns a new standalone ZooKeeper server on a free loopback port, with
// its own directory (see ZooKeeperTickTime for its session timeouts). Each call
// starts another server.
//
// If DISTLOCK_ZK_ADDRS is set, ZooKeeper instead returns an External server at its
// first address, after checking that it answers ruok with imok.
func (e *Env) ZooKeeper() (*Server, error) {
	if v := os.Getenv(EnvZooKeeperAddrs); v != "" {
		addrs := splitAddrs(v)
		if len(addrs) == 0 {
			return nil, fmt.Errorf("testenv: %s=%q holds no address", EnvZooKeeperAddrs, v)
		}
		return e.externalZooKeeper("zookeeper", addrs[0])
	}
	nodes, err := e.startZooKeeper("zookeeper", 1)
	if err != nil {
		return nil, err
	}
	return nodes[0], nil
}

// An Ensemble is a ZooKeeper ensemble: a leader and followers that replicate every
// write to a quorum.
type Ensemble struct {
	// Nodes are the servers, in the order of their server ids (myid 1, 2, ...).
	Nodes []*Server

	peers *zkPeers // the fault proxies between the nodes; nil unless proxied
}

// Addrs returns the client addresses of the nodes, for zk.Connect.
func (en *Ensemble) Addrs() []string {
	addrs := make([]string, len(en.Nodes))
	for i, s := range en.Nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Leader returns the node that reports Mode: leader (srvr), waiting until exactly
// one node does and every other running node is a follower. It returns ctx's error,
// with the modes last seen, if that does not happen before ctx is done.
func (en *Ensemble) Leader(ctx context.Context) (*Server, error) {
	delay := 10 * time.Millisecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	var last string
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("testenv: ZooKeeper ensemble %v has no leader: %w (last modes: %s)", en.Addrs(), ctx.Err(), last)
		case <-timer.C:
		}
		var leader *Server
		leaders, serving, running := 0, 0, 0
		var modes []string
		for _, s := range en.Nodes {
			if !s.External() && !s.Running() {
				modes = append(modes, s.Name+"=stopped")
				continue
			}
			running++
			mode, err := ZooKeeperMode(ctx, s.Addr())
			if err != nil {
				modes = append(modes, fmt.Sprintf("%s=%v", s.Name, err))
				continue
			}
			modes = append(modes, s.Name+"="+mode)
			switch mode {
			case "leader":
				leaders++
				serving++
				leader = s
			case "follower", "observer":
				serving++
			}
		}
		last = strings.Join(modes, ", ")
		if leaders == 1 && serving == running {
			return leader, nil
		}
		timer.Reset(delay)
		delay = min(delay*2, 200*time.Millisecond)
	}
}

// WaitServing waits until the ensemble has one leader and every running node serves
// clients (see Leader), for example after a node was killed or restarted.
func (en *Ensemble) WaitServing(ctx context.Context) error {
	_, err := en.Leader(ctx)
	return err
}

// ZooKeeperEnsemble returns a new ensemble of n ZooKeeper servers (n >= 1, usually 3
// or 5) on free loopback ports, each with its own directory, once one of them leads
// and all the others follow. Kill, Restart, Pause and Resume act on single nodes;
// after restarting a node, wait for Ensemble.WaitServing.
//
// If DISTLOCK_ZK_ADDRS is set, ZooKeeperEnsemble instead returns External servers at
// its first n addresses (it must hold at least n), after checking that each answers
// ruok with imok.
func (e *Env) ZooKeeperEnsemble(n int) (*Ensemble, error) {
	if n <= 0 {
		return nil, fmt.Errorf("testenv: ZooKeeperEnsemble(%d): n must be positive", n)
	}
	if v := os.Getenv(EnvZooKeeperAddrs); v != "" {
		addrs := splitAddrs(v)
		if len(addrs) < n {
			return nil, fmt.Errorf("testenv: %s=%q has %d addresses; the tests need an ensemble of %d", EnvZooKeeperAddrs, v, len(addrs), n)
		}
		en := &Ensemble{}
		for i, a := range addrs[:n] {
			s, err := e.externalZooKeeper(fmt.Sprintf("zookeeper-%d", i+1), a)
			if err != nil {
				return nil, err
			}
			en.Nodes = append(en.Nodes, s)
		}
		return en, nil
	}
	nodes, err := e.startZooKeeper("zookeeper-ensemble", n)
	if err != nil {
		return nil, err
	}
	en := &Ensemble{Nodes: nodes}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultReadyTimeout)
	defer cancel()
	if err := en.WaitServing(ctx); err != nil {
		return nil, err
	}
	return en, nil
}

// zkClasspath returns the java binary and the class path of the ZooKeeper server.
func zkClasspath() (java, classpath string, err error) {
	java, err = LookBin("java", javaBinCandidates...)
	if err != nil {
		return "", "", err
	}
	// zookeeper.jar names its dependencies in its manifest's Class-Path.
	jar, err := LookBin("zookeeper.jar", zkJarCandidates...)
	if err != nil {
		return "", "", err
	}
	classpath = jar
	// A logging binding sends the server's log to stderr (the Server's log file);
	// without one, slf4j drops it.
	if simple, err := LookBin("slf4j-simple.jar", slf4jCandidates...); err == nil {
		classpath += string(os.PathListSeparator) + simple
	}
	return java, classpath, nil
}

// startZooKeeper starts n servers named prefix (n == 1: standalone, else an ensemble)
// concurrently; each is ready once it answers imok and, in an ensemble, serves as
// leader or follower.
func (e *Env) startZooKeeper(prefix string, n int) ([]*Server, error) {
	// The peers' quorum and election ports go into every node's zoo.cfg, so they are
	// chosen here, once; each node's client port is its Server's own port.
	var peerPorts []int
	if n > 1 {
		var err error
		if peerPorts, err = FreePorts(2 * n); err != nil {
			return nil, err
		}
	}
	views := make([][]int, n)
	for i := range views {
		views[i] = peerPorts
	}
	return e.startZooKeeperViews(prefix, views)
}

// startZooKeeperViews starts one server per element of views, concurrently, as
// startZooKeeper does. views[i] holds the quorum and election port of every node
// (2*len(views) ports) as node i reaches them: nodes may reach each other through
// proxies (see ZooKeeperProxiedEnsemble). nil views[i] means standalone.
func (e *Env) startZooKeeperViews(prefix string, views [][]int) ([]*Server, error) {
	java, classpath, err := zkClasspath()
	if err != nil {
		return nil, err
	}
	n := len(views)
	nodes := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		name := prefix
		if n > 1 {
			name = fmt.Sprintf("%s-%d", prefix, i+1)
		}
		dir, err := e.tempDir(name)
		if err != nil {
			errs[i] = err
			break
		}
		wg.Go(func() {
			nodes[i], errs[i] = e.StartProcess(zkSpec(name, dir, java, classpath, i+1, views[i]))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return nodes, nil
}

// zkSpec describes ZooKeeper server id (1-based) in dir. peerPorts holds the quorum
// and election ports of every node of an ensemble (nil: standalone).
func zkSpec(name, dir, java, classpath string, id int, peerPorts []int) ProcessSpec {
	dataDir := filepath.Join(dir, "data")
	cfg := filepath.Join(dir, "zoo.cfg")
	ensemble := len(peerPorts) > 0
	return ProcessSpec{
		Name: name,
		Bin:  java,
		Args: []string{
			"-Xmx256m", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
			"-Djava.net.preferIPv4Stack=true",
			"-Dzookeeper.jmx.log4j.disable=true",
			"-Dorg.slf4j.simpleLogger.showDateTime=true",
			"-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
			"-cp", classpath,
			"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg,
		},
		Dir: dir,
		Prepare: func(s *Server) error {
			if err := os.MkdirAll(dataDir, 0o755); err != nil {
				return err
			}
			var b strings.Builder
			fmt.Fprintf(&b, "tickTime=%d\n", ZooKeeperTickTime.Milliseconds())
			fmt.Fprintf(&b, "minSessionTimeout=%d\n", ZooKeeperMinSessionTimeout.Milliseconds())
			fmt.Fprintf(&b, "maxSessionTimeout=%d\n", ZooKeeperMaxSessionTimeout.Milliseconds())
			fmt.Fprintf(&b, "dataDir=%s\n", dataDir)
			fmt.Fprintf(&b, "clientPort=%d\n", s.Port())
			b.WriteString("clientPortAddress=127.0.0.1\n")
			b.WriteString("maxClientCnxns=0\n")
			b.WriteString("admin.enableServer=false\n")
			b.WriteString("4lw.commands.whitelist=ruok,srvr,stat,conf,mntr,cons\n")
			// Kill (SIGKILL) loses nothing that was written to the page cache; only a
			// machine crash would, which the tests do not simulate.
			b.WriteString("forceSync=no\n")
			b.WriteString("preAllocSize=4096\n")
			b.WriteString("autopurge.purgeInterval=0\n")
			if ensemble {
				b.WriteString("initLimit=10\nsyncLimit=5\n")
				b.WriteString("standaloneEnabled=false\nreconfigEnabled=false\n")
				b.WriteString("quorumListenOnAllIPs=false\n")
				for j := range len(peerPorts) / 2 {
					fmt.Fprintf(&b, "server.%d=127.0.0.1:%d:%d\n", j+1, peerPorts[2*j], peerPorts[2*j+1])
				}
				if err := os.WriteFile(filepath.Join(dataDir, "myid"), []byte(strconv.Itoa(id)+"\n"), 0o644); err != nil {
					return err
				}
			}
			return os.WriteFile(cfg, []byte(b.String()), 0o644)
		},
		Ready: func(ctx context.Context, addr string) error {
			if out, err := ZooKeeperCommand(ctx, addr, "ruok"); err != nil {
				return err
			} else if out != "imok" {
				return fmt.Errorf("ruok answered %q", out)
			}
			// Make sure the server on this port is ours, not one that won a race for
			// the port while ours failed to bind.
			conf, err := ZooKeeperCommand(ctx, addr, "conf")
			if err != nil {
				return err
			}
			if !strings.Contains(conf, "dataDir="+dataDir) {
				return fmt.Errorf("the ZooKeeper at %s is not ours: conf does not name dataDir=%s", addr, dataDir)
			}
			if ensemble {
				mode, err := ZooKeeperMode(ctx, addr)
				if err != nil {
					return err
				}
				if mode != "leader" && mode != "follower" {
					return fmt.Errorf("not serving yet: mode %q", mode)
				}
			}
			return nil
		},
		// The JVM starts in about a second; an ensemble also elects a leader.
		ReadyTimeout: 60 * time.Second,
		StopTimeout:  10 * time.Second,
	}
}

// externalZooKeeper returns an External server at addr once it answers imok.
func (e *Env) externalZooKeeper(name, addr string) (*Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := ZooKeeperCommand(ctx, addr, "ruok")
	if err == nil && out != "imok" {
		err = fmt.Errorf("ruok answered %q", out)
	}
	if err != nil {
		return nil, fmt.Errorf("testenv: %s=%s: ZooKeeper does not answer ruok (is 4lw.commands.whitelist set?): %w", EnvZooKeeperAddrs, addr, err)
	}
	return e.ExternalServer(name, addr), nil
}

// ZooKeeperCommand sends a four-letter word (ruok, srvr, stat, conf, mntr, cons) to
// the ZooKeeper server at addr on a new connection and returns its answer, trimmed.
// It is bounded by ctx and by 2s, and starts no goroutine; it is meant for readiness
// checks and tests, not for the code under test.
func ZooKeeperCommand(ctx context.Context, addr, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, zkCommandTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(c, 1<<20))
	if err != nil {
		return "", fmt.Errorf("%s: %w", cmd, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// ZooKeeperMode returns the Mode the server at addr reports with srvr: "standalone",
// "leader", "follower" or "observer"; or an error (a server that is electing a leader
// answers that it is not serving requests).
func ZooKeeperMode(ctx context.Context, addr string) (string, error) {
	out, err := ZooKeeperCommand(ctx, addr, "srvr")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "Mode:"); ok {
			return strings.TrimSpace(m), nil
		}
	}
	if out == "" {
		return "", errors.New("srvr: empty answer (not in 4lw.commands.whitelist?)")
	}
	return "", fmt.Errorf("srvr: %s", strings.SplitN(out, "\n", 2)[0])
}
