package testenv

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"regexp"
	"testing"
	"time"
)

// TestEtcdVersionMatchesTool checks that EtcdVersion is the version tools/etcd builds.
func TestEtcdVersionMatchesTool(t *testing.T) {
	b, err := os.ReadFile("../../tools/etcd/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?go\.etcd\.io/etcd/server/v3\s+(v\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("tools/etcd/go.mod does not require go.etcd.io/etcd/server/v3")
	}
	if got := string(m[1]); got != EtcdVersion {
		t.Fatalf("tools/etcd builds etcd %s but testenv.EtcdVersion is %s: update the constant", got, EtcdVersion)
	}
}

// newEtcdTestEnv returns an Env of the test's own, closed when the test ends.
func newEtcdTestEnv(t *testing.T) *Env {
	t.Helper()
	t.Setenv(EnvEtcdEndpoints, "") // these tests signal their servers, so they must own them
	env, err := newEnv()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.close(); err != nil {
			t.Error(err)
		}
	})
	return env
}

func etcdPut(ctx context.Context, addr, key, value string) error {
	in := map[string]string{
		"key":   base64.StdEncoding.EncodeToString([]byte(key)),
		"value": base64.StdEncoding.EncodeToString([]byte(value)),
	}
	var out struct{}
	return etcdPost(ctx, addr, "/v3/kv/put", in, &out)
}

func etcdGet(ctx context.Context, addr, key string) (string, error) {
	in := map[string]string{"key": base64.StdEncoding.EncodeToString([]byte(key))}
	var out struct {
		Kvs []struct {
			Value string `json:"value"`
		} `json:"kvs"`
	}
	if err := etcdPost(ctx, addr, "/v3/kv/range", in, &out); err != nil {
		return "", err
	}
	if len(out.Kvs) == 0 {
		return "", fmt.Errorf("key %q not found", key)
	}
	v, err := base64.StdEncoding.DecodeString(out.Kvs[0].Value)
	return string(v), err
}

func TestEtcdKillRestartKeepsData(t *testing.T) {
	env := newEtcdTestEnv(t)
	s, err := env.Etcd()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := etcdPut(ctx, s.Addr(), "k", "v1"); err != nil {
		t.Fatal(err)
	}
	s.Kill(t)
	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = EtcdStatus(short, s.Addr())
	cancelShort()
	if err == nil {
		t.Fatal("a killed etcd answered Status")
	}
	start := time.Now()
	s.Restart(t)
	t.Logf("Restart took %v", time.Since(start))
	if got, err := etcdGet(ctx, s.Addr(), "k"); err != nil || got != "v1" {
		t.Fatalf("after Kill and Restart: get k = %q, %v; want v1", got, err)
	}

	s.Pause(t)
	short, cancelShort = context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = EtcdStatus(short, s.Addr())
	cancelShort()
	if err == nil {
		t.Fatal("a paused etcd answered Status")
	}
	s.Resume(t)
	if _, err := EtcdStatus(ctx, s.Addr()); err != nil {
		t.Fatalf("Status after Resume: %v", err)
	}
}

func TestEtcdClusterLeaderKill(t *testing.T) {
	env := newEtcdTestEnv(t)
	start := time.Now()
	c, err := env.EtcdCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("3 members ready in %v: %v", time.Since(start), c.Endpoints())
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := etcdPut(ctx, leader.Addr(), "k", "before"); err != nil {
		t.Fatal(err)
	}
	leader.Kill(t)
	start = time.Now()
	next, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next == leader {
		t.Fatalf("the killed member %s is still the leader", leader)
	}
	t.Logf("new leader %s after %v", next, time.Since(start))
	if err := etcdPut(ctx, next.Addr(), "k", "after"); err != nil {
		t.Fatalf("put after the election: %v", err)
	}
	leader.Restart(t) // rejoins the running cluster
	if got, err := etcdGet(ctx, leader.Addr(), "k"); err != nil || got != "after" {
		t.Fatalf("the restarted member reads k = %q, %v; want after", got, err)
	}

	start = time.Now()
	c.Restart(t)
	t.Logf("whole-cluster Restart took %v", time.Since(start))
	for _, s := range c.Members {
		if got, err := etcdGet(ctx, s.Addr(), "k"); err != nil || got != "after" {
			t.Fatalf("after the cluster restart %s reads k = %q, %v; want after", s, got, err)
		}
	}
}
