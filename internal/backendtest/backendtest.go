// Package backendtest gives the tests of packages built over any distlock.Locker
// (election, gocronlock) independent clients of every backend, on real servers that
// internal/testenv starts: memlock, Redis, etcd, ZooKeeper, PostgreSQL and MariaDB.
//
// A test binary starts the servers once in its TestMain:
//
//	var backends []backendtest.Backend
//
//	func TestMain(m *testing.M) {
//		testenv.Main(m, func(env *testenv.Env) error {
//			var err error
//			backends, err = backendtest.Start(env, "mypkg")
//			return err
//		})
//	}
//
// and each test runs once per backend, with clients from Backend.NewClient.
package backendtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/testenv"
)

// A Client is one client of a backend, as if in a process of its own: its own
// connections and session, sharing only the server with the other clients.
type Client struct {
	// Locker is the client, closed when the test ends.
	distlock.Locker
	// Crash makes the client vanish without unlocking anything, as a killed process
	// would: from then on none of its requests reaches the server, and the server
	// frees its leases by their expiry (ZooKeeper: by its session's expiry). It is
	// permanent for the rest of the test.
	Crash func()
}

// A Backend makes clients of one backend.
type Backend struct {
	// Name names the backend in subtests: "memlock", "redis", ...
	Name string
	// NewClient returns a new Client whose Inspect reports owner as its Holder.Owner
	// (memlock reports memlock.Owner whatever owner is). Everything it opens is
	// closed when t ends.
	NewClient func(t testing.TB, owner string) Client
	// Owners reports whether Inspect reports each client's owner.
	Owners bool
	// TTL is a short ttl that the backend honours (etcd counts whole seconds).
	TTL time.Duration
	// Freed is how long after a Crash the server may still hold the crashed
	// client's lease, at most: TTL plus the backend's grace, or, for ZooKeeper, the
	// session timeout plus its grace.
	Freed time.Duration
}

// Start starts a server of every backend on env and returns the backends, in the
// order memlock, redis, etcd, zookeeper, postgres, mariadb. name names the
// caller's tables, prefixes and keys on the servers, so that test binaries that
// share an external server do not meet.
func Start(env *testenv.Env, name string) ([]Backend, error) {
	bs := []Backend{memBackend()}
	for _, start := range []func(*testenv.Env, string) (Backend, error){
		startRedis, startEtcd, startZooKeeper, startPostgres, startMariaDB,
	} {
		b, err := start(env, name)
		if err != nil {
			return nil, err
		}
		bs = append(bs, b)
	}
	return bs, nil
}

// Run runs f as a subtest of t for every backend in bs.
func Run(t *testing.T, bs []Backend, f func(t *testing.T, b Backend)) {
	t.Helper()
	for _, b := range bs {
		t.Run(b.Name, func(t *testing.T) { f(t, b) })
	}
}

// errCrashed is the transport error of a crashed memlock client.
var errCrashed = fmt.Errorf("backendtest: client crashed")

// opCtx returns a context for setting a client up: 30s, or the test's end.
func opCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
