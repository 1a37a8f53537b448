package redlock_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/redlock"
)

// TestReleaseMessageDigest: Unlock's release message on every node is the SHA-1
// (hex) of the lease's token followed by '|' and the next turn (none here), as the
// Waits compare it with what acquireScript and waitScript report of the holder,
// whether the node or the client computes the digest.
func TestReleaseMessageDigest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := newLocker(t, nil)
	key := "release-message-digest"
	_, _, channel := redlock.Names(redlock.DefaultPrefix, key)
	var subs []*redis.PubSub
	for _, c := range clients(t, nodeAddrs()) {
		ps := c.(*redis.Client).Subscribe(ctx, channel)
		t.Cleanup(func() { _ = ps.Close() })
		_, err := ps.Receive(ctx) // the subscription's confirmation
		require.NoError(t, err)
		subs = append(subs, ps)
	}
	lease, err := l.TryLock(ctx, key, 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx, lease))
	sum := sha1.Sum([]byte(lease.Token))
	want := hex.EncodeToString(sum[:]) + "|"
	for i, ps := range subs {
		m, err := ps.ReceiveMessage(ctx)
		require.NoError(t, err, "node %d", i)
		require.Equal(t, want, m.Payload, "node %d", i)
	}
}
