package zklock_test

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/zklock"
)

// TestKeyNodeWithoutWrite: a key node that grants no write (another client made it
// with an ACL of its own) makes TryLock's multi (the lock node's create and the key
// node's setData) fail with zk.ErrNoAuth; TryLock then falls back to a plain create
// and still returns the lock node's czxid as the Fence, strictly increasing across
// holders, and excludes a second holder.
func TestKeyNodeWithoutWrite(t *testing.T) {
	root := "/distlock-noauth-" + driver.NewToken()[:10]
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

// TestClaimedWaitExpires: the TryLock that follows a Wait whose lock node holds the
// key takes that lease over, with Expires counted from before the lock node's
// create; when less than half the validity is left by then, it proves the session
// afresh and counts from before that write.
func TestClaimedWaitExpires(t *testing.T) {
	a := newClient(t, standaloneAddrs(), sessionTimeout, nil, false)
	b := newClient(t, standaloneAddrs(), sessionTimeout, &zklock.Options{WaitContends: true}, false)
	t0 := time.Now()
	probe, err := b.l.TryLock(ctxT(t), uniqueKey(t)+"-probe", time.Minute)
	require.NoError(t, err)
	valid := probe.Expires.Sub(t0) // the validity, give or take a round trip
	require.NoError(t, b.l.Unlock(ctxT(t), probe))

	for _, long := range []bool{false, true} {
		key := uniqueKey(t)
		la, err := a.l.TryLock(ctxT(t), key, time.Minute)
		require.NoError(t, err)
		woke := make(chan error, 1)
		wctx := ctxT(t)
		go func() { woke <- b.l.Wait(wctx, key) }()
		require.Eventually(t, func() bool { return len(children(t, a.conn, keyPath(key))) == 3 }, 5*time.Second, 10*time.Millisecond,
			"the waiter's nodes")
		queued := time.Now() // after the waiter's lock node was created
		if long {
			time.Sleep(valid/2 + 100*time.Millisecond)
		}
		require.NoError(t, a.l.Unlock(ctxT(t), la))
		require.NoError(t, <-woke)
		start := time.Now()
		lb, err := b.l.TryLock(ctxT(t), key, time.Minute)
		require.NoError(t, err)
		require.Greater(t, lb.Fence, la.Fence)
		if long {
			// Without the fresh write it would be about valid/2 earlier.
			require.False(t, lb.Expires.Before(start.Add(valid-50*time.Millisecond)), "Expires %v after the claim's start; want the validity %v", lb.Expires.Sub(start), valid)
		} else {
			require.True(t, lb.Expires.Before(queued.Add(valid)), "Expires counts from before the waiter's lock node")
		}
		require.NoError(t, b.l.Unlock(ctxT(t), lb))
	}
}
