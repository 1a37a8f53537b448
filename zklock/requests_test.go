package zklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/zklock"
)

// TestRequestsPerPair pins the ZooKeeper requests of an uncontended TryLock+Unlock,
// and the round trips they take (the fewest of several pairs, so that a scheduler
// that delays a request once does not count). On a key whose node exists: one multi
// (the lock node's create and the key node's setData, whose stat gives the fence and
// shows the lock node as the only child: no listing), then the delete: two round
// trips, against zk.Lock's three. On a fresh key, a multi that finds no key node and
// the key node's create come first: four.
func TestRequestsPerPair(t *testing.T) {
	w := newWire()
	opts := *quiet
	opts.Dialer = w.dial
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := zklock.Connect(ctx, standaloneAddrs(), sessionTimeout, &opts)
	require.NoError(t, err)
	defer s.Close()
	l, err := zklock.New(s, &zklock.Options{TickTime: testenv.ZooKeeperTickTime})
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()

	pair := func(key string) (ops string, rounds int) {
		w.reset()
		lease, err := l.TryLock(ctx, key, 30*time.Second)
		require.NoError(t, err)
		require.NoError(t, l.Unlock(ctx, lease))
		ops, _, rounds = w.snapshot()
		return ops, rounds
	}
	prefix := "requests-" + driver.NewToken()[:10] + "-"
	pair(prefix) // Prefix's nodes exist from here on

	const pairs = 10
	fewest := func(key func(i int) string, wantOps string) int {
		least := -1
		for i := range pairs {
			ops, rounds := pair(key(i))
			require.Equal(t, wantOps, ops, "pair %d", i)
			if least < 0 || rounds < least {
				least = rounds
			}
		}
		return least
	}
	one := prefix + "one"
	pair(one)
	rounds := fewest(func(int) string { return one }, "delete=1 multi=1")
	require.Equal(t, 2, rounds, "round trips of a pair on a key whose node exists")

	rounds = fewest(func(i int) string { return prefix + "fresh-" + string(rune('a'+i)) },
		"createContainer=1 delete=1 multi=2")
	require.Equal(t, 4, rounds, "round trips of a pair on a fresh key")
}
