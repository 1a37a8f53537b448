package redislock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/redislock"
)

// startRedis starts a redis-server of the test's own with extra arguments.
func startRedis(t *testing.T, extra ...string) *testenv.Server {
	t.Helper()
	s, err := env.RedisWith(extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// check runs CheckServer on a Locker over c and returns its report.
func check(t *testing.T, c redis.UniversalClient) redislock.Report {
	t.Helper()
	t.Cleanup(func() { _ = c.Close() })
	r, err := newLockerOn(t, c, nil).CheckServer(ctxT(t))
	if err != nil {
		t.Fatalf("CheckServer: %v", err)
	}
	t.Logf("report:\n%s", r)
	return r
}

// settings returns the Settings of r's findings, "+" marking the unchecked ones.
func settings(r redislock.Report) []string {
	var s []string
	for _, f := range r.Findings {
		if f.Unchecked {
			s = append(s, "+"+f.Setting)
		} else {
			s = append(s, f.Setting)
		}
	}
	return s
}

func wantSettings(t *testing.T, r redislock.Report, want ...string) {
	t.Helper()
	if got := settings(r); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("findings %v, want %v", got, want)
	}
}

// TestCheckServerSafe: the test servers persist every write, never evict and have
// no replicas: nothing to report, for a single server and for each Cluster master.
func TestCheckServerSafe(t *testing.T) {
	r := check(t, redis.NewClient(&redis.Options{Addr: redisSrv.Addr()}))
	if !r.OK() || len(r.Servers) != 1 || r.Servers[0].Role != "master" || r.Servers[0].Config["appendfsync"] != "always" {
		t.Fatalf("a safe server: %+v", r)
	}
	r = check(t, redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()}))
	if !r.OK() || len(r.Servers) != len(cluster.Nodes) {
		t.Fatalf("a safe Cluster of %d masters: %+v", len(cluster.Nodes), r)
	}
	r = check(t, redis.NewFailoverClient(&redis.FailoverOptions{MasterName: sentinelMaster, SentinelAddrs: []string{sentinelSrv.Addr()}}))
	if !r.OK() || len(r.Servers) != 1 || r.Servers[0].Role != "master" {
		t.Fatalf("a safe Sentinel-managed master: %+v", r)
	}
}

// TestCheckServerUnsafe: servers started with settings that free held locks or
// repeat fences get one finding each.
func TestCheckServerUnsafe(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--appendonly", "no", "--maxmemory", "100mb", "--maxmemory-policy", "volatile-lru"}, []string{"maxmemory-policy", "appendonly"}},
		{[]string{"--maxmemory-policy", "allkeys-lfu"}, []string{"maxmemory-policy"}},
		{[]string{"--appendfsync", "everysec"}, []string{"appendfsync"}},
		{[]string{"--appendfsync", "no"}, []string{"appendfsync"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			s := startRedis(t, tc.args...)
			wantSettings(t, check(t, redis.NewClient(&redis.Options{Addr: s.Addr()})), tc.want...)
		})
	}
}

// TestCheckServerReplication: a client that reaches a replica, and one that reaches
// a master with a replica (which a failover can lose locks to), are told so.
func TestCheckServerReplication(t *testing.T) {
	master := startRedis(t)
	host, port, _ := strings.Cut(master.Addr(), ":")
	replica := startRedis(t, "--replicaof", host, port)
	wantSettings(t, check(t, redis.NewClient(&redis.Options{Addr: replica.Addr()})), "role")
	mc := redis.NewClient(&redis.Options{Addr: master.Addr()})
	require.Eventually(t, func() bool {
		info, err := mc.Info(t.Context(), "replication").Result()
		return err == nil && strings.Contains(info, "connected_slaves:1")
	}, 10*time.Second, 2*time.Millisecond, "the replica to connect")
	wantSettings(t, check(t, mc), "replication")
}

// TestCheckServerConfigRefused: a user whose ACL denies CONFIG gets a report that
// says what it could not check, not an error.
func TestCheckServerConfigRefused(t *testing.T) {
	user, pass := "check-"+strings.ToLower(driver.NewToken()[:8]), driver.NewToken()
	raw := newClient(t, redisSrv)
	if err := raw.Do(ctxT(t), "ACL", "SETUSER", user, "on", ">"+pass, "~*", "&*", "+@all", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Do(context.Background(), "ACL", "DELUSER", user) })
	r := check(t, redis.NewClient(&redis.Options{Addr: redisSrv.Addr(), Username: user, Password: pass}))
	wantSettings(t, r, "+CONFIG")
	if !strings.Contains(r.Findings[0].Message, "NOPERM") {
		t.Fatalf("the finding does not say why: %s", r.Findings[0])
	}
}

// TestCheckServerUnreachable: a server that cannot be reached is an error.
func TestCheckServerUnreachable(t *testing.T) {
	s := startRedis(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	s.Kill(t)
	if _, err := newLockerOn(t, c, nil).CheckServer(ctxT(t)); err == nil {
		t.Fatalf("CheckServer of a dead server: no error")
	}
}
