package redlock_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/distlock/distlock/internal/testenv"
)

// nodes are the five independent redis-servers of this package's tests, started once
// by TestMain. Tests that kill or restart some of them bring them back (t.Cleanup),
// so every test starts with all five running.
var nodes []*testenv.Server

func TestMain(m *testing.M) {
	// The tests kill nodes on purpose; go-redis logs every failed dial.
	redis.SetLogger(quiet{})
	testenv.Main(m, func(env *testenv.Env) error {
		// After a client has failed to dial a dead node PoolSize times, go-redis
		// starts a probe goroutine (ConnPool.tryDial) that sleeps 1s between
		// dials and notices that the client was closed only when it wakes up: it
		// cannot be stopped sooner, so it may outlive the last test by a second.
		env.IgnoreLeaks(goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
		var err error
		nodes, err = env.RedisNodes(5)
		return err
	})
}

// quiet is a go-redis logger that drops everything.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
