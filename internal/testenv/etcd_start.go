package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/distlock/distlock/faultproxy"
)

// etcdBoot collects the peer URLs of the members of a cluster that is being
// started, so that each member's configuration can list every peer
// (initial-cluster), and holds what later starts of a member need.
type etcdBoot struct {
	env     *Env
	name    string
	n       int
	proxied bool // peer traffic goes through a proxy per member (etcd_peers.go)
	mu      sync.Mutex
	ports   map[string]int               // member name -> the peer port it listens on
	peers   map[string]string            // member name -> the peer URL it advertises
	proxies map[string]*faultproxy.Proxy // member name -> its peer proxy, when proxied
	rejoin  map[string]bool              // members that start empty in a running cluster (LoseData)
	servers []*Server                    // the members, once started
	all     chan struct{}                // closed once every member's peer URL is known
}

// memberName is the name of member i of a cluster of n named name.
func (b *etcdBoot) memberName(i int) string {
	if b.n == 1 {
		return b.name
	}
	return fmt.Sprintf("%s-%d", b.name, i)
}

// startEtcdCluster starts n members named name-0 ... (or just name when n is 1)
// together, and returns once each is ready; with proxied, each member's peer
// traffic goes through a fault proxy (see EtcdProxiedCluster). On failure it stops
// what it started.
func (e *Env) startEtcdCluster(name string, n int, proxied bool) (*EtcdCluster, error) {
	bin, err := EtcdBin()
	if err != nil {
		return nil, err
	}
	boot := &etcdBoot{env: e, name: name, n: n, proxied: proxied, ports: make(map[string]int),
		peers: make(map[string]string), proxies: make(map[string]*faultproxy.Proxy),
		rejoin: make(map[string]bool), all: make(chan struct{})}
	if proxied {
		// After the members stopped: a member stopping while its peers cannot
		// reach it waits for them.
		e.Cleanup(boot.closeProxies)
	}
	c := &EtcdCluster{Members: make([]*Server, n), boot: boot}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		member := boot.memberName(i)
		wg.Go(func() {
			c.Members[i], errs[i] = e.StartProcess(ProcessSpec{
				Name:    member,
				Bin:     bin,
				Args:    []string{"--config-file", "{dir}/etcd.json"},
				Ports:   2, // client, peer
				Prepare: func(s *Server) error { return boot.prepare(s, member) },
				Ready: func(ctx context.Context, addr string) error {
					return etcdReady(ctx, addr, member)
				},
				ReadyTimeout: 60 * time.Second,
				StopTimeout:  10 * time.Second,
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, s := range c.Members {
			if s != nil {
				s.Stop()
			}
		}
		boot.closeProxies()
		return nil, err
	}
	boot.mu.Lock()
	boot.servers = append(boot.servers, c.Members...)
	boot.mu.Unlock()
	return c, nil
}

// prepare writes the member's configuration file. On the first start it waits until
// every member of the cluster has chosen its ports; later (Restart) it reuses them.
func (b *etcdBoot) prepare(s *Server, member string) error {
	ports := s.Ports()
	b.mu.Lock()
	if old, ok := b.ports[member]; ok && old != ports[1] {
		b.mu.Unlock()
		// The other members already started with the old port in their
		// initial-cluster; EtcdCluster starts a new cluster instead.
		return fmt.Errorf("member %s got new ports after a failed start", member)
	}
	if _, ok := b.ports[member]; !ok {
		b.ports[member] = ports[1]
		b.peers[member] = fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		if b.proxied {
			p, err := faultproxy.New(fmt.Sprintf("127.0.0.1:%d", ports[1]), nil)
			if err != nil {
				b.mu.Unlock()
				return fmt.Errorf("peer proxy of member %s: %w", member, err)
			}
			b.proxies[member] = p
			b.peers[member] = "http://" + p.Addr()
		}
	}
	if len(b.peers) == b.n {
		select {
		case <-b.all:
		default:
			close(b.all)
		}
	}
	b.mu.Unlock()
	select {
	case <-b.all:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("the other members of etcd cluster %s did not choose their ports within 30s", b.name)
	}
	b.mu.Lock()
	var initial []string
	for m, u := range b.peers {
		initial = append(initial, m+"="+u)
	}
	advertised := b.peers[member]
	state := "new" // ignored once the data directory exists
	if b.rejoin[member] {
		state = "existing"
	}
	b.mu.Unlock()
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	conf := map[string]any{
		"name":                        member,
		"data-dir":                    filepath.Join(s.Dir, "data"),
		"listen-client-urls":          client,
		"advertise-client-urls":       client,
		"listen-peer-urls":            peer,
		"initial-advertise-peer-urls": advertised,
		"initial-cluster":             strings.Join(initial, ","),
		"initial-cluster-state":       state,
		"initial-cluster-token":       b.name,
		"heartbeat-interval":          EtcdHeartbeat.Milliseconds(),
		"election-timeout":            EtcdElectionTimeout.Milliseconds(),
		"listen-metrics-urls":         "",
		"enable-grpc-gateway":         true, // EtcdStatus uses the JSON gateway
		// Test data need not survive a machine crash; a killed process loses
		// nothing it wrote, so Kill and Restart keep the data.
		"unsafe-no-fsync": true,
		"logger":          "zap",
		"log-level":       "info",
		"log-outputs":     []string{"stderr"}, // the Server's log file
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	// JSON is YAML, which etcd's --config-file reads.
	return os.WriteFile(filepath.Join(s.Dir, "etcd.json"), data, 0o644)
}

// etcdReady succeeds once the etcd at addr is the member named member and has a
// leader.
func etcdReady(ctx context.Context, addr, member string) error {
	st, err := EtcdStatus(ctx, addr)
	if err != nil {
		return err
	}
	if st.Leader == 0 {
		return fmt.Errorf("etcd at %s has no leader", addr)
	}
	var list struct {
		Header struct {
			MemberID uint64 `json:"member_id,string"`
		} `json:"header"`
		Members []struct {
			ID   uint64 `json:"ID,string"`
			Name string `json:"name"`
		} `json:"members"`
	}
	if err := etcdCall(ctx, addr, "/v3/cluster/member/list", &list); err != nil {
		return err
	}
	for _, m := range list.Members {
		if m.ID == list.Header.MemberID && m.Name == member {
			return nil
		}
	}
	return fmt.Errorf("the etcd at %s is not member %s (another process may have its port)", addr, member)
}
