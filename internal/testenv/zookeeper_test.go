package testenv

import (
	"context"
	"errors"
	"io"
	"log"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// zkEnv returns an Env of its own for a ZooKeeper test (the package's TestMain starts
// no ZooKeeper), closed when the test ends.
func zkEnv(t *testing.T) *Env {
	t.Helper()
	t.Setenv(EnvZooKeeperAddrs, "") // these tests signal their servers, so they must own them
	env, err := newEnv()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.close(); err != nil {
			t.Errorf("close Env: %v", err)
		}
	})
	return env
}

// zkConnect connects a go-zookeeper client and waits for its session.
func zkConnect(t *testing.T, addrs []string) *zk.Conn {
	t.Helper()
	conn, events, err := zk.Connect(addrs, 10*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() { // drain, so that the library never blocks on it
					for range events {
					}
				}()
				return conn
			}
		case <-timeout.C:
			t.Fatalf("no ZooKeeper session with %v within 30s (state %v)", addrs, conn.State())
		}
	}
}

// zkRetry retries f while it fails with a connection error (the client reconnects
// after a server restart), for up to 30s.
func zkRetry(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond) // polling pace, bounded by the deadline
	}
}

func TestZooKeeperStandalone(t *testing.T) {
	env := zkEnv(t)
	start := time.Now()
	s, err := env.ZooKeeper()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("standalone ZooKeeper ready at %s after %v", s.Addr(), time.Since(start))
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
		t.Fatalf("Addr %q is not on 127.0.0.1", s.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if mode, err := ZooKeeperMode(ctx, s.Addr()); err != nil || mode != "standalone" {
		t.Fatalf("mode = %q, %v; want standalone", mode, err)
	}

	// Session timeouts are granted within the configured bounds: a small request is
	// raised to the minimum. Session expiry then takes well under a second.
	conn := zkConnect(t, []string{s.Addr()})
	if _, err := conn.Create("/kept", []byte("v1"), zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}

	// Kill and Restart keep the data.
	s.Kill(t)
	if _, err := ZooKeeperCommand(ctx, s.Addr(), "ruok"); err == nil {
		t.Fatal("a killed ZooKeeper answered ruok")
	}
	start = time.Now()
	s.Restart(t)
	t.Logf("Restart took %v", time.Since(start))
	zkRetry(t, "Get /kept after Restart", func() error {
		b, _, err := conn.Get("/kept")
		if err == nil && string(b) != "v1" {
			t.Fatalf("after Kill and Restart /kept = %q, want v1", b)
		}
		return err
	})

	// Pause stops answers; Resume brings them back.
	s.Pause(t)
	pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = ZooKeeperCommand(pctx, s.Addr(), "ruok")
	pcancel()
	if err == nil {
		t.Fatal("a paused ZooKeeper answered ruok within 300ms")
	}
	s.Resume(t)
	if out, err := ZooKeeperCommand(ctx, s.Addr(), "ruok"); err != nil || out != "imok" {
		t.Fatalf("ruok after Resume = %q, %v", out, err)
	}
}

func TestZooKeeperEnsemble(t *testing.T) {
	env := zkEnv(t)
	start := time.Now()
	en, err := env.ZooKeeperEnsemble(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("3-node ensemble %v ready after %v", en.Addrs(), time.Since(start))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader, err := en.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn := zkConnect(t, en.Addrs())
	if _, err := conn.Create("/replicated", []byte("v1"), zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}

	// Killing the leader makes another node lead; the data survives.
	leader.Kill(t)
	start = time.Now()
	next, err := en.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next == leader {
		t.Fatalf("the killed node %s is still the leader", leader)
	}
	t.Logf("new leader %s elected %v after killing %s", next, time.Since(start), leader)
	zkRetry(t, "Get /replicated after the leader died", func() error {
		b, _, err := conn.Get("/replicated")
		if err == nil && string(b) != "v1" {
			t.Fatalf("/replicated = %q, want v1", b)
		}
		return err
	})
	zkRetry(t, "Set /replicated without the old leader", func() error {
		_, err := conn.Set("/replicated", []byte("v2"), -1)
		return err
	})

	// The old leader rejoins as a follower and catches up.
	leader.Restart(t)
	if err := en.WaitServing(ctx); err != nil {
		t.Fatal(err)
	}
	other := zkConnect(t, []string{leader.Addr()})
	zkRetry(t, "Get /replicated from the restarted node", func() error {
		if _, err := other.Sync("/replicated"); err != nil {
			return err
		}
		b, _, err := other.Get("/replicated")
		if err == nil && string(b) != "v2" {
			return errors.New("restarted node has " + string(b) + ", want v2")
		}
		return err
	})
}

func TestZooKeeperExternal(t *testing.T) {
	env := zkEnv(t)
	s, err := env.ZooKeeper()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvZooKeeperAddrs, s.Addr()+", ")
	ext, err := env.ZooKeeper()
	if err != nil {
		t.Fatal(err)
	}
	if !ext.External() || ext.Addr() != s.Addr() {
		t.Fatalf("with %s set, ZooKeeper() = %v (external %v), want an External server at %s", EnvZooKeeperAddrs, ext, ext.External(), s.Addr())
	}
	if _, err := env.ZooKeeperEnsemble(3); err == nil || !strings.Contains(err.Error(), EnvZooKeeperAddrs) {
		t.Fatalf("ZooKeeperEnsemble(3) with one external address: err = %v, want one naming %s", err, EnvZooKeeperAddrs)
	}
	t.Setenv(EnvZooKeeperAddrs, "127.0.0.1:1")
	if _, err := env.ZooKeeper(); err == nil || !strings.Contains(err.Error(), EnvZooKeeperAddrs) {
		t.Fatalf("ZooKeeper() with a dead external address: err = %v, want one naming %s", err, EnvZooKeeperAddrs)
	}
}
