package testenv

import (
	"os"
	"testing"
)

// The test binary doubles as a tiny line-echo server ("helper mode", see
// runEchoServer), so that the generic core is tested without any installed server.
const helperEnv = "TESTENV_HELPER_LISTEN"

var (
	echoSrv  *Server
	redisSrv *Server
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(helperEnv); addr != "" {
		os.Exit(runEchoServer(addr))
	}
	if os.Getenv(orphanEnv) != "" {
		os.Exit(runOrphanHelper())
	}
	// These tests signal their servers, so they must own them.
	for _, v := range []string{EnvRedisAddr, EnvRedLockAddrs, EnvRedisClusterAddrs} {
		os.Unsetenv(v)
	}
	Main(m, func(env *Env) error {
		var err error
		if echoSrv, err = env.StartProcess(echoSpec("echo")); err != nil {
			return err
		}
		redisSrv, err = env.Redis()
		return err
	})
}
