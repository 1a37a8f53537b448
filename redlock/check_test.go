package redlock_test

import (
	"slices"
	"testing"

	"github.com/distlock/distlock/faultproxy"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/redlock"
)

// checkNodes runs CheckServer over clients of addrs and returns the settings of its
// findings ("+" marks an unchecked one).
func checkNodes(t *testing.T, addrs []string) []string {
	t.Helper()
	l, err := redlock.New(clients(t, addrs), nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.CheckServer(t.Context())
	if err != nil {
		t.Fatalf("CheckServer: %v", err)
	}
	t.Logf("report:\n%s", r)
	var got []string
	for _, f := range r.Findings {
		if f.Unchecked {
			got = append(got, "+"+f.Setting)
		} else {
			got = append(got, f.Setting)
		}
	}
	return got
}

func startNode(t *testing.T, extra ...string) *testenv.Server {
	t.Helper()
	s, err := env.RedisWith(extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// TestCheckServer: the test nodes are safe; a node that restarts from an RDB
// snapshot, one that evicts, a dead one and one counted twice are each reported; a
// node without persistence that comes back empty is not (redlock detects it).
func TestCheckServer(t *testing.T) {
	if got := checkNodes(t, nodeAddrs()); len(got) != 0 {
		t.Fatalf("the five test nodes: findings %v, want none", got)
	}
	addrs := nodeAddrs()[:2]
	p, err := faultproxy.New(addrs[0], nil) // a second way to node 0
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	snapshot := startNode(t, "--appendonly", "no", "--save", "3600 1")
	empty := startNode(t, "--appendonly", "no")
	evicts := startNode(t, "--maxmemory-policy", "volatile-ttl")
	dead := startNode(t)
	dead.Kill(t)
	got := checkNodes(t, append(addrs, p.Addr(), snapshot.Addr(), empty.Addr(), evicts.Addr(), dead.Addr()))
	want := []string{"run_id", "appendonly", "maxmemory-policy", "+connection"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("findings %v, want %v", got, want)
	}
}
