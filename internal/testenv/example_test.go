package testenv_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/distlock/distlock/internal/testenv"
)

var exampleRedis *testenv.Server

// A package's TestMain starts its servers with Main; the tests then use them, and
// inject faults with Kill, Restart, Pause and Resume.
func ExampleMain() {
	// In a _test.go file:
	//
	//	func TestMain(m *testing.M) { testenv.Main(m, setup) }
	setup := func(env *testenv.Env) error {
		var err error
		exampleRedis, err = env.Redis()
		return err
	}
	_ = setup

	// A test that checks how a client rides out a server crash:
	_ = func(t *testing.T) {
		exampleRedis.Kill(t)    // SIGKILL; acknowledged writes stay on disk
		exampleRedis.Restart(t) // same port, same data; returns once PING answers
	}
}

// StartProcess runs any server; the templates {port} and {dir} are filled in before
// each start.
func ExampleEnv_StartProcess() {
	setup := func(env *testenv.Env) error {
		bin, err := testenv.LookBin("redis-server")
		if err != nil {
			return err // wraps testenv.ErrNotInstalled; Main names the install command
		}
		s, err := env.StartProcess(testenv.ProcessSpec{
			Name: "my-redis",
			Bin:  bin,
			Args: []string{"--port", "{port}", "--bind", "127.0.0.1", "--dir", "{dir}"},
			Ready: func(ctx context.Context, addr string) error {
				_, err := testenv.RedisCommand(ctx, addr, "PING")
				return err
			},
		})
		if err != nil {
			return err
		}
		fmt.Println("redis at", s.Addr(), "logs to", s.Logs())
		return nil
	}
	_ = setup
}
