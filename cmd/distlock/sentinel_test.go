package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/internal/testenv"
)

// startSentinel starts a Redis Sentinel (redis-server --sentinel) that monitors
// master as "mymaster", and returns its address.
func startSentinel(env *testenv.Env, master *testenv.Server) (string, error) {
	bin, err := testenv.LookBin("redis-server")
	if err != nil {
		return "", err
	}
	s, err := env.StartProcess(testenv.ProcessSpec{
		Name: "sentinel",
		Bin:  bin,
		Args: []string{"{dir}/sentinel.conf", "--sentinel"},
		Prepare: func(s *testenv.Server) error {
			conf := fmt.Sprintf("port %d\nbind 127.0.0.1\nprotected-mode no\ndir %s\nlogfile \"\"\n"+
				"sentinel monitor mymaster 127.0.0.1 %d 1\nsentinel down-after-milliseconds mymaster 60000\n",
				s.Port(), s.Dir, master.Port())
			return os.WriteFile(filepath.Join(s.Dir, "sentinel.conf"), []byte(conf), 0o644)
		},
		Ready: func(ctx context.Context, addr string) error {
			got, err := testenv.RedisCommand(ctx, addr, "SENTINEL", "get-master-addr-by-name", "mymaster")
			if err != nil {
				return err
			}
			a, ok := got.([]any)
			if !ok || len(a) != 2 || a[1] != strconv.Itoa(master.Port()) {
				return fmt.Errorf("the sentinel at %s names master %v", addr, got)
			}
			return nil
		},
	})
	if err != nil {
		return "", err
	}
	return s.Addr(), nil
}

// TestSentinel runs a command under a lock on the master that a Sentinel names,
// and checks it.
func TestSentinel(t *testing.T) {
	env := baseEnv(t)
	backend := "redis-sentinel://" + servers.sentinel + "/mymaster"
	key := fmt.Sprintf("sentinel %d", time.Now().UnixNano())
	f1 := fenceOf(t, env, backend, key)
	f2 := fenceOf(t, env, "redis-sentinel://"+servers.sentinel+",127.0.0.1:1/mymaster/0", key)
	require.Greater(t, f2, f1, "the second run's fence")

	// The lock is the master's: a run through redis:// sees it held.
	a, _ := holdKey(t, env, backend, key, "A", filepath.Join(t.TempDir(), "log"))
	code, _, errOut := runDL(t, env, "run", "--backend", backendURLs["redis"], key, "--", "true")
	require.Equal(t, exitHeld, code, "stderr %s", errOut)
	a.closeStdin()
	a.expect(0)

	code, out, errOut := runDL(t, env, "check", "--backend", backend)
	require.Equal(t, 0, code, "stdout %s\nstderr %s", out, errOut)
	require.Contains(t, out, "note       sentinel:")
	require.Contains(t, out, "server     master "+servers.redis.Addr()+": Redis 7")
	require.Contains(t, out, "ok         master "+servers.redis.Addr()+" maxmemory-policy=noeviction")

	code, _, errOut = runDL(t, env, "run", "--backend", "redis-sentinel://"+servers.sentinel+"/nosuchmaster", key, "--", "true")
	require.Equal(t, exitFailed, code)
	require.Equal(t, 1, strings.Count(errOut, "\n"), "stderr %q", errOut)

	code, _, errOut = runDL(t, env, "run", "--backend", "redis-sentinel://"+servers.sentinel, key, "--", "true")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "want the master's name as the path")
}
