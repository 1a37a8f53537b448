package testenv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func redisCmd(t *testing.T, addr string, within time.Duration, args ...string) any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	got, err := RedisCommand(ctx, addr, args...)
	if err != nil {
		t.Fatalf("%s at %s: %v", strings.Join(args, " "), addr, err)
	}
	return got
}

func TestRedisPauseResume(t *testing.T) {
	s := redisSrv
	if got := redisCmd(t, s.Addr(), 5*time.Second, "PING"); got != "PONG" {
		t.Fatalf("PING = %v", got)
	}
	s.Pause(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := RedisCommand(ctx, s.Addr(), "PING")
	cancel()
	if err == nil {
		t.Fatal("a paused redis answered PING within 200ms")
	}
	start := time.Now()
	s.Resume(t)
	if got := redisCmd(t, s.Addr(), 5*time.Second, "PING"); got != "PONG" {
		t.Fatalf("PING after Resume = %v", got)
	}
	t.Logf("PING answered %v after Resume", time.Since(start))
}

func TestRedisKillRestartKeepsData(t *testing.T) {
	s := redisSrv
	key := fmt.Sprintf("fence-%d", time.Now().UnixNano())
	var want int64
	for range 3 {
		want = redisCmd(t, s.Addr(), 5*time.Second, "INCR", key).(int64)
	}
	s.Kill(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, err := RedisCommand(ctx, s.Addr(), "PING")
	cancel()
	if err == nil {
		t.Fatal("a killed redis answered PING")
	}
	start := time.Now()
	s.Restart(t)
	t.Logf("Restart took %v", time.Since(start))
	if got := redisCmd(t, s.Addr(), 5*time.Second, "GET", key); got != fmt.Sprint(want) {
		t.Fatalf("after Kill and Restart GET %s = %v, want %d", key, got, want)
	}
}

func TestRedisCommandErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := RedisCommand(ctx, redisSrv.Addr(), "NOSUCHCOMMAND")
	var re RedisError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v, want a RedisError", err)
	}
	if got, err := RedisCommand(ctx, redisSrv.Addr(), "GET", "no-such-key"); got != nil || err != nil {
		t.Fatalf("GET missing = %v, %v", got, err)
	}
}

func TestRedisExternal(t *testing.T) {
	env, err := newEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer env.close()
	t.Setenv(EnvRedisAddr, redisSrv.Addr())
	s, err := env.Redis()
	if err != nil {
		t.Fatal(err)
	}
	if !s.External() || s.Addr() != redisSrv.Addr() {
		t.Fatalf("External() = %v, Addr() = %s", s.External(), s.Addr())
	}
	ft := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Kill(ft)
	}()
	<-done
	if !strings.Contains(ft.msg, "external server") {
		t.Fatalf("Kill on an external server: %q", ft.msg)
	}

	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvRedisAddr, fmt.Sprintf("127.0.0.1:%d", port))
	if _, err := env.Redis(); err == nil || !strings.Contains(err.Error(), EnvRedisAddr) {
		t.Fatalf("Redis() with a dead %s: err = %v", EnvRedisAddr, err)
	}

	t.Setenv(EnvRedLockAddrs, redisSrv.Addr()+", "+redisSrv.Addr())
	if _, err := env.RedisNodes(3); err == nil {
		t.Fatal("RedisNodes(3) with 2 addresses succeeded")
	}
	nodes, err := env.RedisNodes(2)
	if err != nil || len(nodes) != 2 || !nodes[1].External() {
		t.Fatalf("RedisNodes(2) = %v, %v", nodes, err)
	}
}

func TestRedisNodes(t *testing.T) {
	env, err := newEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer env.close()
	nodes, err := env.RedisNodes(3)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		if seen[n.Addr()] {
			t.Fatalf("duplicate address %s", n.Addr())
		}
		seen[n.Addr()] = true
		redisCmd(t, n.Addr(), 5*time.Second, "SET", "k", n.Name)
	}
	for _, n := range nodes {
		if got := redisCmd(t, n.Addr(), 5*time.Second, "GET", "k"); got != n.Name {
			t.Fatalf("%s: GET k = %v; the nodes are not independent", n, got)
		}
	}
	if err := env.close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Running() {
			t.Fatalf("%s still running after close", n)
		}
	}
}

func TestRedisCluster(t *testing.T) {
	env, err := newEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer env.close()
	start := time.Now()
	c, err := env.RedisCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("RedisCluster(3) ready in %v at %v", time.Since(start), c.Addrs())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer cc.Close()
	for i := range 20 {
		if err := cc.Set(ctx, fmt.Sprintf("key-%d", i), i, 0).Err(); err != nil {
			t.Fatalf("SET through the cluster: %v", err)
		}
	}
	// The keys are spread over more than one master.
	used := 0
	for _, n := range c.Nodes {
		if redisCmd(t, n.Addr(), 5*time.Second, "DBSIZE").(int64) > 0 {
			used++
		}
	}
	if used < 2 {
		t.Fatalf("20 keys landed on %d master(s)", used)
	}

	// A killed master comes back with its slots and data.
	n := c.Nodes[1]
	n.Kill(t)
	n.Restart(t)
	if err := c.WaitOK(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if got, err := cc.Get(ctx, fmt.Sprintf("key-%d", i)).Int(); err != nil || got != i {
			t.Fatalf("GET key-%d after a master restart = %d, %v", i, got, err)
		}
	}
	if err := cc.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestRedisClusterNeedsThreeMasters(t *testing.T) {
	if _, err := (&Env{}).RedisCluster(2); err == nil {
		t.Fatal("RedisCluster(2) succeeded")
	}
}
