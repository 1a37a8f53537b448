package redislock_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/internal/testenv"
)

// Servers of this package's tests, started once by TestMain.
var (
	redisSrv    *testenv.Server  // single redis-server: conformance, unit tests, benchmarks
	cluster     *testenv.Cluster // 3-master Redis Cluster
	sentinelSrv *testenv.Server  // redis-sentinel monitoring failoverSrv as "mymaster"
	failoverSrv *testenv.Server  // the master that sentinelSrv monitors

	// env starts the servers of tests that need one of their own (CheckServer's).
	env *testenv.Env
)

const sentinelMaster = "mymaster"

func TestMain(m *testing.M) {
	redis.SetLogger(quietSentinel{})
	testenv.Main(m, func(e *testenv.Env) error {
		env = e
		var err error
		if redisSrv, err = env.Redis(); err != nil {
			return err
		}
		if cluster, err = env.RedisCluster(3); err != nil {
			return err
		}
		if failoverSrv, err = env.Redis(); err != nil {
			return err
		}
		if sentinelSrv, err = startSentinel(env, failoverSrv.Addr()); err != nil {
			return err
		}
		// The examples read these, as a user's program would. Set after the
		// servers started (testenv would take them for external servers), and
		// RedisWith ignores them.
		if err := os.Setenv(testenv.EnvRedisAddr, redisSrv.Addr()); err != nil {
			return err
		}
		return os.Setenv(testenv.EnvRedisClusterAddrs, strings.Join(cluster.Addrs(), ","))
	})
}

// startSentinel starts a redis-sentinel (redis-server --sentinel) that monitors the
// master at masterAddr under the name sentinelMaster, with a quorum of 1. testenv has
// no Sentinel method, so this uses its generic StartProcess.
// quietSentinel is go-redis' logger for this test binary: it drops the lines that every
// new failover client logs when it asks the sentinel for the master, and keeps the rest.
type quietSentinel struct{}

func (quietSentinel) Printf(ctx context.Context, format string, v ...any) {
	if strings.HasPrefix(format, "sentinel: ") {
		return
	}
	log.Printf("redis: "+format, v...)
}

func startSentinel(env *testenv.Env, masterAddr string) (*testenv.Server, error) {
	bin, err := testenv.LookBin("redis-server")
	if err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(masterAddr)
	if err != nil {
		return nil, err
	}
	dir := env.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	return env.StartProcess(testenv.ProcessSpec{
		Name: "redis-sentinel",
		Bin:  bin,
		Args: []string{conf, "--sentinel"},
		Dir:  dir,
		Prepare: func(s *testenv.Server) error {
			// Sentinel rewrites its configuration file, so it must be writable.
			text := fmt.Sprintf("port %d\nbind 127.0.0.1\nprotected-mode no\ndir %s\n"+
				"sentinel monitor %s %s %s 1\nsentinel down-after-milliseconds %s 5000\n",
				s.Port(), dir, sentinelMaster, host, port, sentinelMaster)
			return os.WriteFile(conf, []byte(text), 0o644)
		},
		Ready: func(ctx context.Context, addr string) error {
			got, err := testenv.RedisCommand(ctx, addr, "SENTINEL", "get-master-addr-by-name", sentinelMaster)
			if err != nil {
				return err
			}
			if a, ok := got.([]any); !ok || len(a) != 2 || a[0] != host || a[1] != port {
				return fmt.Errorf("sentinel reports master %v, want %s", got, masterAddr)
			}
			return nil
		},
		ReadyTimeout: 30 * time.Second,
	})
}
