package zklock_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/zklock"
)

// waiterNodes returns the waiter nodes (_w_...) among path's children.
func waiterNodes(t *testing.T, conn *zk.Conn, path string) []string {
	t.Helper()
	var ws []string
	for _, name := range children(t, conn, path) {
		if strings.HasPrefix(name, "_w_") {
			ws = append(ws, name)
		}
	}
	return ws
}

// TestCloseDeletesItsNodes: Close with the zk.Conn left open deletes (in the
// background) the nodes that
// only the Locker's background work would have deleted: a queued waiter's node, the
// node of a Wait that returned (kept for the next TryLock), and the node of a lease
// watched through Lost (Close reports it lost). Otherwise they stay for the session's
// life: later waiters sleep behind them until their deadline, and go-zookeeper's
// zk.Lock, which counts every "lock-<seq>" child, blocks on a free key.
func TestCloseDeletesItsNodes(t *testing.T) {
	for _, stage := range []string{"queued", "returned", "watched lease"} {
		t.Run(strings.ReplaceAll(stage, " ", "_"), func(t *testing.T) {
			a := newClient(t, standaloneAddrs(), sessionTimeout, nil, false)
			b := newClient(t, standaloneAddrs(), sessionTimeout, nil, false)
			key := uniqueKey(t)
			kp := keyPath(key)
			la, err := a.l.TryLock(ctxT(t), key, sessionTimeout)
			if err != nil {
				t.Fatal(err)
			}
			switch stage {
			case "queued", "returned":
				waited := make(chan error, 1)
				go func() { waited <- b.l.Wait(t.Context(), key) }()
				require.Eventually(t, func() bool { return len(waiterNodes(t, a.conn, kp)) == 1 }, 5*time.Second, 10*time.Millisecond, "B's waiter node appears")
				if stage == "returned" {
					if err := a.l.Unlock(ctxT(t), la); err != nil {
						t.Fatal(err)
					}
					if err := <-waited; err != nil {
						t.Fatalf("Wait after the release: %v", err)
					}
				}
				if err := b.l.Close(); err != nil {
					t.Fatal(err)
				}
				if stage == "queued" {
					if err := <-waited; !errors.Is(err, distlock.ErrClosed) {
						t.Fatalf("Wait cut short by Close: %v, want ErrClosed", err)
					}
					if err := a.l.Unlock(ctxT(t), la); err != nil {
						t.Fatal(err)
					}
				}
			case "watched lease":
				if err := a.l.Unlock(ctxT(t), la); err != nil {
					t.Fatal(err)
				}
				lb, err := b.l.TryLock(ctxT(t), key, sessionTimeout)
				if err != nil {
					t.Fatal(err)
				}
				lost := b.l.Lost(lb)
				if err := b.l.Close(); err != nil {
					t.Fatal(err)
				}
				select {
				case <-lost:
				default:
					t.Fatal("Lost open after Close")
				}
			}
			// Close deletes its nodes in the background, while B's session lives on.
			require.Eventually(t, func() bool { return len(children(t, a.conn, kp)) == 0 }, 5*time.Second, 5*time.Millisecond,
				"after B's Close (its connection open) the key's node holds %v", children(t, a.conn, kp))
			if b.conn.State() != zk.StateHasSession {
				t.Fatalf("B's connection is %v; the test needs its session alive", b.conn.State())
			}
			// go-zookeeper's zk.Lock takes the free key at once.
			c := connect(t, standaloneAddrs(), sessionTimeout)
			defer c.Close()
			zl := zk.NewLock(c, kp, zk.WorldACL(zk.PermAll))
			locked := make(chan error, 1)
			go func() { locked <- zl.Lock() }()
			select {
			case err := <-locked:
				if err != nil {
					t.Fatal(err)
				}
				if err := zl.Unlock(); err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				c.Close() // ends the blocked zk.Lock
				<-locked
				t.Fatalf("zk.Lock on the free key still blocked after 5s; children %v", children(t, a.conn, kp))
			}
		})
	}
}

// TestReapWaiterIDSyncs: the removal of a waiter node whose create lost its reply
// must see the create even on a server that has not applied it yet (the client
// reconnected to a lagging server): it syncs that server with the leader first.
// The test delays the link between a follower and the leader, creates a waiter node
// through the leader, and reaps its id at once through the lagging follower.
func TestReapWaiterIDSyncs(t *testing.T) {
	li := leaderIndex(t)
	y := (li + 1) % len(zkEns.Nodes)
	b := newClient(t, []string{zkEns.Nodes[y].Addr()}, sessionTimeout, nil, false)
	c := connect(t, []string{zkEns.Nodes[li].Addr()}, sessionTimeout)
	defer c.Close()
	acl := zk.WorldACL(zk.PermAll)
	parent := "/reap-waiter-" + driver.NewToken()
	if _, err := c.Create(parent, nil, zk.FlagPersistent, acl); err != nil {
		t.Fatal(err)
	}
	const lag = 400 * time.Millisecond // below syncLimit ticks (1s): the follower stays
	for _, p := range zkEns.PeerProxies(t, y, li) {
		p.Delay(lag)
		defer p.Heal()
	}
	id := driver.NewToken()
	created, err := c.Create(zklock.WaitNodePrefix(parent, id), nil, zk.FlagEphemeralSequential, acl)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b.l.ReapWaiterID(parent, id)
	t.Logf("ReapWaiterID through the lagging follower took %v", time.Since(start).Round(time.Millisecond))
	if _, err := c.Sync(parent); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := c.Exists(created); err != nil || ok {
		t.Fatalf("after ReapWaiterID the waiter node %s exists = %v (%v): the lagging server's listing did not show it", created, ok, err)
	}
}

// TestLostChecksTheNodesSession: Lost watches the session that owns the lease's node,
// not the session the connection has when Lost is called. The lease here was taken in
// a session that ended before Lost was called (the standalone server restarted
// without its data, so its Expires is still ahead), and Lost's first look at the node
// fails (the connection is down); Lost must still report the lease lost before its
// Expires, not wait for it.
func TestLostChecksTheNodesSession(t *testing.T) {
	srv, err := zkEnv.ZooKeeper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	const st = 15 * time.Second // Expires stays ahead across the server's restart
	a := newClient(t, []string{srv.Addr()}, st, &zklock.Options{DisconnectGrace: time.Minute}, true)
	key := uniqueKey(t)
	la, err := a.l.TryLock(ctxT(t), key, st)
	if err != nil {
		t.Fatal(err)
	}
	old := a.conn.SessionID()
	srv.Kill(t)
	dataDir := filepath.Join(srv.Dir, "data")
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dataDir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	srv.Restart(t)
	// The server refuses clients that saw a later transaction than its own last one:
	// write until it is past the client's.
	w := connect(t, []string{srv.Addr()}, sessionTimeout)
	for i := range 50 {
		if _, err := w.Create("/filler-"+strconv.Itoa(i), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	require.Eventually(t, func() bool {
		return a.conn.State() == zk.StateHasSession && a.conn.SessionID() != old
	}, 20*time.Second, 10*time.Millisecond, "a new session after the server lost its data")
	// Lost's first look at the node fails: with the server unreachable, go-zookeeper
	// fails the queued request once it has tried every server.
	a.cut()
	requireState(t, a.conn, zk.StateConnecting, 5*time.Second)
	lost := a.l.Lost(la)
	probe := make(chan error, 1)
	go func() { _, _, err := a.conn.Exists("/"); probe <- err }() // queued after Lost's
	if err := <-probe; err == nil {
		t.Fatal("a request succeeded with the server cut off")
	}
	a.heal()
	select {
	case <-lost:
		if la.Remaining() <= 0 {
			t.Fatal("Lost closed only at the lease's Expires")
		}
		t.Logf("Lost closed %v before the lease's Expires", la.Remaining().Round(time.Millisecond))
	case <-time.After(la.Remaining()):
		t.Fatalf("Lost still open at the lease's Expires, %v after its session ended", st)
	}
}
