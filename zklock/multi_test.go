package zklock_test

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/zklock"
)

// TestKeyNodeWithoutWrite: a key node that grants no write (another client made it
// with an ACL of its own) makes TryLock's multi (the lock node's create and the key
// node's setData) fail with zk.ErrNoAuth; TryLock then falls back to a plain create
// and still returns the lock node's czxid as the Fence, strictly increasing across
// holders, and excludes a second holder.
func TestKeyNodeWithoutWrite(t *testing.T) {
	root := "/distlock-noauth-" + distlock.NewToken()[:10]
	opts := &zklock.Options{Prefix: root}
	a := newClient(t, standaloneAddrs(), sessionTimeout, opts, false)
	b := newClient(t, standaloneAddrs(), sessionTimeout, opts, false)
	key := uniqueKey(t)
	kp := root + "/" + base64.RawURLEncoding.EncodeToString([]byte(key))
	_, err := a.conn.Create(root, nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	_, err = a.conn.Create(kp, nil, 0, zk.WorldACL(zk.PermAll&^zk.PermWrite))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = a.conn.Delete(kp, -1)
		_ = a.conn.Delete(root, -1)
	})

	var last uint64
	for i := range 3 {
		lease, err := a.l.TryLock(ctxT(t), key, time.Minute)
		require.NoError(t, err, "pair %d", i)
		names := children(t, a.conn, kp)
		require.Len(t, names, 1)
		_, stat, err := a.conn.Get(kp + "/" + names[0])
		require.NoError(t, err)
		require.Equal(t, uint64(stat.Czxid), lease.Fence, "Fence is the lock node's czxid")
		require.Greater(t, lease.Fence, last, "Fences increase")
		last = lease.Fence
		_, err = b.l.TryLock(ctxT(t), key, time.Minute)
		require.ErrorIs(t, err, distlock.ErrLocked)
		require.NoError(t, a.l.Unlock(ctxT(t), lease))
	}
}
