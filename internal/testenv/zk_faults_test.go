package testenv

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// electionHandshake builds the initial message of an election connection.
func electionHandshake(version, sid int64, addrs string) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.BigEndian, version)
	binary.Write(&b, binary.BigEndian, sid)
	binary.Write(&b, binary.BigEndian, uint32(len(addrs)))
	b.WriteString(addrs)
	return b.Bytes()
}

func TestElectionHandshakeRewrite(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in, want  []byte
		wantError bool
	}{
		{"v1", electionHandshake(zkElectionProtocolV1, 3, "127.0.0.1:4711"), electionHandshake(zkElectionProtocolV1, 3, "0.0.0.0:4711"), false},
		{"v2 list", electionHandshake(zkElectionProtocolV2, 2, "127.0.0.1:1|[::1]:2"), electionHandshake(zkElectionProtocolV2, 2, "0.0.0.0:1|0.0.0.0:2"), false},
		{"old protocol: the server id first", []byte{0, 0, 0, 0, 0, 0, 0, 7}, []byte{0, 0, 0, 0, 0, 0, 0, 7}, false},
		{"empty address list", electionHandshake(zkElectionProtocolV1, 1, ""), nil, true},
		{"truncated", electionHandshake(zkElectionProtocolV1, 1, "127.0.0.1:1")[:22], nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// What follows the handshake must stay unread.
			r := bytes.NewReader(append(append([]byte(nil), tc.in...), "rest"...))
			got, err := readElectionHandshake(r)
			if tc.wantError {
				if err == nil {
					t.Fatalf("readElectionHandshake = %q, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("readElectionHandshake = %q, want %q", got, tc.want)
			}
			if r.Len() != len("rest") {
				t.Fatalf("%d bytes left unread, want 4", r.Len())
			}
		})
	}
}

// waitMode polls the mode of Nodes[i] until ok accepts it (an error counts as the
// mode "error: ...") or d passes, and returns how long it took.
func waitMode(t *testing.T, en *Ensemble, i int, d time.Duration, what string, ok func(mode string) bool) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		mode, err := ZooKeeperMode(ctx, en.Nodes[i].Addr())
		cancel()
		if err != nil {
			mode = "error: " + err.Error()
		}
		if ok(mode) {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: node %d still in mode %q after %v", what, i, mode, d)
		}
		time.Sleep(20 * time.Millisecond) // polling pace, bounded by the deadline
	}
}

func serving(mode string) bool { return mode == "leader" || mode == "follower" }

// leaderIndex returns the index of the leader, waiting until the ensemble serves.
func leaderIndex(t *testing.T, en *Ensemble) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := en.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return en.NodeIndex(l.Addr())
}

// readThrough reads path on Nodes[i] after a sync, retrying connection errors.
func readThrough(t *testing.T, en *Ensemble, i int, path string) string {
	t.Helper()
	conn := zkConnect(t, []string{en.Nodes[i].Addr()})
	defer conn.Close()
	var got []byte
	zkRetry(t, "read "+path+" on node "+fmt.Sprint(i), func() error {
		if _, err := conn.Sync(path); err != nil {
			return err
		}
		var err error
		got, _, err = conn.Get(path)
		return err
	})
	return string(got)
}

// TestZooKeeperProxiedEnsembleFaults: the nodes of a proxied ensemble reach each other
// only through their proxies, so that Isolate cuts a follower or the leader off
// (election included: an isolated leader with the highest server id, which the
// others would otherwise elect again and again, must not keep them from electing
// another); ChangeLeader and LoseData leave an ensemble that serves with its data.
func TestZooKeeperProxiedEnsembleFaults(t *testing.T) {
	env := zkEnv(t)
	start := time.Now()
	en, err := env.ZooKeeperProxiedEnsemble(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("proxied ensemble %v ready after %v", en.Addrs(), time.Since(start))
	if !en.Proxied() {
		t.Fatal("Proxied() = false")
	}
	// No node's configuration names a peer's real ports.
	for i, s := range en.Nodes {
		cfg, err := os.ReadFile(filepath.Join(s.Dir, "zoo.cfg"))
		if err != nil {
			t.Fatal(err)
		}
		for j, p := range en.Nodes {
			if j == i {
				continue
			}
			peer, err := os.ReadFile(filepath.Join(p.Dir, "zoo.cfg"))
			if err != nil {
				t.Fatal(err)
			}
			own := configLine(t, string(peer), j+1)
			if seen := configLine(t, string(cfg), j+1); seen == own {
				t.Fatalf("node %d reaches node %d at its own address %s, not through a proxy", i, j, own)
			}
		}
	}
	writer := zkConnect(t, en.Addrs())
	acl := zk.WorldACL(zk.PermAll)
	if _, err := writer.Create("/probe", []byte("v0"), zk.FlagPersistent, acl); err != nil {
		t.Fatal(err)
	}
	write := func(v string) {
		t.Helper()
		zkRetry(t, "write "+v, func() error {
			_, err := writer.Set("/probe", []byte(v), -1)
			return err
		})
	}
	bound := 10 * time.Second // syncLimit (1s) or initLimit (2s) ticks, an election, a loaded machine

	for _, role := range []string{"follower", "leader"} {
		t.Run("Isolate "+role, func(t *testing.T) {
			leader := leaderIndex(t, en)
			i := leader
			if role == "follower" {
				i = (leader + 1) % len(en.Nodes)
			}
			heal := en.Isolate(t, i)
			took := waitMode(t, en, i, bound, "the isolated node stops serving", func(m string) bool { return !serving(m) })
			t.Logf("isolated %s (node %d) stopped serving after %v", role, i, took)
			// The others serve (and elect a leader if they lost theirs) and take writes.
			for j := range en.Nodes {
				if j != i {
					waitMode(t, en, j, bound, "a node of the majority serves", serving)
				}
			}
			write("while " + role + " isolated")
			// The isolated node stays out: it cannot follow anybody (initLimit is 2s).
			observe := time.Now().Add(3 * time.Second)
			for time.Now().Before(observe) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				mode, err := ZooKeeperMode(ctx, en.Nodes[i].Addr())
				cancel()
				if err == nil && serving(mode) {
					t.Fatalf("the isolated node %d serves as %s", i, mode)
				}
				time.Sleep(50 * time.Millisecond) // polling pace over the observed window
			}
			heal()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := en.WaitServing(ctx); err != nil {
				t.Fatal(err)
			}
			if got, want := readThrough(t, en, i, "/probe"), "while "+role+" isolated"; got != want {
				t.Fatalf("healed node %d has /probe = %q, want %q", i, got, want)
			}
		})
	}

	t.Run("ChangeLeader", func(t *testing.T) {
		old := en.Nodes[leaderIndex(t, en)]
		next := en.ChangeLeader(t)
		if next == old {
			t.Fatalf("ChangeLeader returned the old leader %s", old)
		}
		if l := en.Nodes[leaderIndex(t, en)]; l != next {
			t.Fatalf("leader %s after ChangeLeader, which returned %s", l, next)
		}
		write("after ChangeLeader")
		if got := readThrough(t, en, en.NodeIndex(old.Addr()), "/probe"); got != "after ChangeLeader" {
			t.Fatalf("the old leader has /probe = %q", got)
		}
	})

	for _, role := range []string{"follower", "leader"} {
		t.Run("LoseData "+role, func(t *testing.T) {
			leader := leaderIndex(t, en)
			i := leader
			if role == "follower" {
				i = (leader + 1) % len(en.Nodes)
			}
			dataDir := filepath.Join(en.Nodes[i].Dir, "data")
			marker := filepath.Join(dataDir, "version-2", "marker")
			if err := os.WriteFile(marker, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			en.LoseData(t, i)
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("after LoseData the marker in %s: %v", dataDir, err)
			}
			if b, err := os.ReadFile(filepath.Join(dataDir, "myid")); err != nil || strings.TrimSpace(string(b)) != fmt.Sprint(i+1) {
				t.Fatalf("myid after LoseData: %q, %v", b, err)
			}
			write("after LoseData " + role)
			if got, want := readThrough(t, en, i, "/probe"), "after LoseData "+role; got != want {
				t.Fatalf("node %d has /probe = %q after rejoining empty, want %q", i, got, want)
			}
		})
	}
}

// configLine returns the value of server.<id> in a zoo.cfg.
func configLine(t *testing.T, cfg string, id int) string {
	t.Helper()
	prefix := fmt.Sprintf("server.%d=", id)
	for _, line := range strings.Split(cfg, "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			return v
		}
	}
	t.Fatalf("no %s line in:\n%s", prefix, cfg)
	return ""
}

// TestZooKeeperIsolateNeedsProxies: Isolate and PeerProxies fail on an ensemble
// whose nodes talk directly.
func TestZooKeeperIsolateNeedsProxies(t *testing.T) {
	en := &Ensemble{Nodes: []*Server{{Name: "a"}, {Name: "b"}}}
	for name, f := range map[string]func(tb testing.TB){
		"Isolate":     func(tb testing.TB) { en.Isolate(tb, 0) },
		"PeerProxies": func(tb testing.TB) { en.PeerProxies(tb, 0, 1) },
	} {
		ft := &fatalTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			f(ft)
		}()
		<-done
		if !strings.Contains(ft.msg, "ZooKeeperProxiedEnsemble") {
			t.Errorf("%s on a direct ensemble: %q, want a failure naming ZooKeeperProxiedEnsemble", name, ft.msg)
		}
	}
}

// fatalTB records Fatalf and ends the calling goroutine.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
