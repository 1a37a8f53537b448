package election_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/election"
	"github.com/distlock/distlock/internal/backendtest"
	"github.com/distlock/distlock/internal/testenv"
)

// backends are every backend's, on servers that TestMain starts.
var backends []backendtest.Backend

func TestMain(m *testing.M) {
	testenv.Main(m, func(env *testenv.Env) error {
		var err error
		backends, err = backendtest.Start(env, "election")
		return err
	})
}

// A candidate is one process of an election: a client of its own and the Election
// on it.
type candidate struct {
	name string
	c    backendtest.Client
	e    *election.Election
}

// newCandidates returns n candidates of the election of key on b, named c0, c1, ...
// (their owner labels).
func newCandidates(t *testing.T, b backendtest.Backend, n int, key string, opts *election.Options) []*candidate {
	t.Helper()
	cs := make([]*candidate, n)
	for i := range cs {
		name := "c" + string(rune('0'+i))
		c := b.NewClient(t, name)
		e, err := election.New(c.Locker, key, opts)
		require.NoError(t, err)
		cs[i] = &candidate{name: name, c: c, e: e}
	}
	return cs
}

// testKey returns a key of the test's own, fresh on every run.
func testKey(t *testing.T) string { return "election/" + t.Name() + "/" + driver.NewToken()[:8] }

// ctxFor returns a context that ends after d or with the test.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// resign resigns lead with a fresh bounded context, as a deferred Resign should.
func resign(t *testing.T, lead *election.Leadership) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return lead.Resign(ctx)
}
