package redlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/redlock"
)

// nodes are the five independent redis-servers of this package's tests, started once
// by TestMain. Tests that kill or restart some of them bring them back (t.Cleanup),
// so every test starts with all five running.
var nodes []*testenv.Server

// env starts the servers of tests that need one of their own (CheckServer's).
var env *testenv.Env

func TestMain(m *testing.M) {
	// The tests kill nodes on purpose; go-redis logs every failed dial.
	redis.SetLogger(quiet{})
	testenv.Main(m, func(e *testenv.Env) error {
		env = e
		// After a client has failed to dial a dead node PoolSize times, go-redis
		// starts a probe goroutine (ConnPool.tryDial) that sleeps 1s between
		// dials and notices that the client was closed only when it wakes up: it
		// cannot be stopped sooner, so it may outlive the last test by a second.
		env.IgnoreLeaks(goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
		var err error
		if nodes, err = env.RedisNodes(5); err != nil {
			return err
		}
		return bootstrap()
	})
}

// bootstrap takes and releases one lock with all five nodes up, as the first use of a
// new deployment should: the nodes then count at once (see redlock's nodestate.go),
// instead of after MaxTTL, for a test that starts with some of them down.
func bootstrap() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cs []redis.UniversalClient
	for _, s := range nodes {
		c := redis.NewClient(&redis.Options{Addr: s.Addr()})
		defer c.Close()
		cs = append(cs, c)
	}
	l, err := redlock.New(cs, nil)
	if err != nil {
		return err
	}
	defer l.Close()
	lease, err := l.TryLock(ctx, "bootstrap", 10*time.Second)
	if err != nil {
		return fmt.Errorf("bootstrap the five nodes: %w", err)
	}
	return l.Unlock(ctx, lease)
}

// quiet is a go-redis logger that drops everything.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
