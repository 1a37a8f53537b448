package testenv

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"
)

// TestParseProcAddr reads the address forms of /proc/net/tcp and tcp6.
func TestParseProcAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0100007F:0CEA":                         "127.0.0.1:3306",
		"0000000000000000FFFF00000100007F:1F90": "127.0.0.1:8080",
		"00000000000000000000000001000000:0050": "[::1]:80",
	} {
		got, err := parseProcAddr(in)
		if err != nil || got.String() != want {
			t.Errorf("parseProcAddr(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
}

// TestDialedBy finds the process that owns the client side of a loopback
// connection: this one, and not another.
func TestDialedBy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	server := netip.MustParseAddrPort(ln.Addr().String())
	if owned, err := dialedBy(os.Getpid(), c.LocalAddr(), server); err != nil || !owned {
		t.Fatalf("dialedBy(this process) = %v, %v; want true", owned, err)
	}
	if owned, err := dialedBy(1, c.LocalAddr(), server); err != nil || owned {
		t.Fatalf("dialedBy(pid 1) = %v, %v; want false", owned, err)
	}
	c.Close()
	if _, err := dialedBy(os.Getpid(), &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, server); err == nil {
		t.Fatal("dialedBy of a connection that does not exist: no error")
	}
}

// memberLeader returns the leader that member s names (0: none), or an error.
func memberLeader(ctx context.Context, s *Server) (uint64, error) {
	st, err := EtcdStatus(ctx, s.Addr())
	return st.Leader, err
}

// TestEtcdProxiedCluster: Isolate cuts one member off from its peers, follower or
// leader, while clients still reach it and the others keep a quorum; heal brings
// it back. ChangeLeader moves leadership; LoseData empties a member, which then
// catches up.
func TestEtcdProxiedCluster(t *testing.T) {
	env := newEtcdTestEnv(t)
	c, err := env.EtcdProxiedCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	index := func(s *Server) int {
		for i, m := range c.Members {
			if m == s {
				return i
			}
		}
		t.Fatalf("%s is no member", s)
		return -1
	}
	// waitIsolated waits until the isolated member names no leader and the others
	// name one of them.
	waitIsolated := func(iso int) {
		t.Helper()
		isoID, err := c.memberID(ctx, iso)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var last string
		for {
			lead, err := memberLeader(ctx, c.Members[iso])
			if err != nil {
				t.Fatalf("the isolated member does not answer its clients: %v", err)
			}
			others := true
			for j, s := range c.Members {
				if j != iso {
					l, err := memberLeader(ctx, s)
					others = others && err == nil && l != 0 && l != isoID
				}
			}
			last = fmt.Sprintf("isolated names %x (itself %x); others agree on another: %v", lead, isoID, others)
			if lead == 0 && others {
				break
			}
			if time.Since(start) > 30*time.Second {
				t.Fatalf("not isolated 30s after Isolate: %s", last)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("isolated after %v", time.Since(start))
	}

	// A follower.
	f := (index(leader) + 1) % 3
	heal := c.Isolate(t, f)
	waitIsolated(f)
	if err := etcdPut(ctx, leader.Addr(), "k", "while isolated"); err != nil {
		t.Fatalf("the majority cannot write while one member is isolated: %v", err)
	}
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	err = etcdPut(short, c.Members[f].Addr(), "k", "on the isolated member")
	cancelShort()
	if err == nil {
		t.Fatal("a write through the isolated member succeeded")
	}
	heal()
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	// The write through the isolated member timed out, so its outcome is unknown:
	// the member may hold the proposal and forward it once the partition heals
	// (seen once), as a request that arrives after its caller gave up. Either
	// value is sound; the member must have caught up with the majority's write.
	if got, err := etcdGet(ctx, c.Members[f].Addr(), "k"); err != nil || got != "while isolated" && got != "on the isolated member" {
		t.Fatalf("after heal the member reads k = %q, %v", got, err)
	}

	// The leader.
	leader, err = c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	heal = c.Isolate(t, index(leader))
	waitIsolated(index(leader))
	heal()
	next, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leader %s isolated and healed; %s leads", leader, next)

	// ChangeLeader.
	before, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after := c.ChangeLeader(t)
	if after == before {
		t.Fatalf("ChangeLeader left %s leading", before)
	}
	if l, err := c.WaitLeader(ctx); err != nil || l != after {
		t.Fatalf("after ChangeLeader the leader is %v, %v; ChangeLeader said %s", l, err, after)
	}

	// LoseData, of a follower and of the leader.
	for _, lose := range []string{"follower", "leader"} {
		if err := etcdPut(ctx, after.Addr(), "k", "before "+lose); err != nil {
			t.Fatal(err)
		}
		l, err := c.WaitLeader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i := index(l)
		if lose == "follower" {
			i = (i + 1) % 3
		}
		oldID, err := c.memberID(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		c.LoseData(t, i)
		newID, err := c.memberID(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		if newID == oldID {
			t.Fatalf("member %d kept its ID %x through LoseData", i, oldID)
		}
		if got, err := etcdGet(ctx, c.Members[i].Addr(), "k"); err != nil || got != "before "+lose {
			t.Fatalf("after LoseData of the %s, it reads k = %q, %v", lose, got, err)
		}
		t.Logf("LoseData of the %s took %v", lose, time.Since(start))
		after, err = c.WaitLeader(ctx)
		if err != nil {
			t.Fatal(err)
		}
	}
	// Isolate still works on a member that rejoined.
	heal = c.Isolate(t, index(after))
	waitIsolated(index(after))
	heal()
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
}
