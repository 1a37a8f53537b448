package zklock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/faultproxy"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/zklock"
)

// heldClient is a Locker whose connection goes through a HoldProxy, which can hold
// what the client sends (HoldNext) while the session lives.
type heldClient struct {
	l    *zklock.Locker
	conn *zk.Conn
	hp   *faultproxy.HoldProxy
}

func newHeldClient(t *testing.T, st time.Duration) *heldClient {
	t.Helper()
	hp, err := faultproxy.NewHoldProxy(zkSrv.Addr(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = hp.Close() })
	sess := connectSession(t, []string{hp.Addr()}, st)
	l, err := zklock.New(sess, &zklock.Options{TickTime: testenv.ZooKeeperTickTime})
	require.NoError(t, err)
	t.Cleanup(func() {
		sess.Close()
		_ = l.Close()
	})
	return &heldClient{l: l, conn: sess.Conn(), hp: hp}
}

// TestCloseDuringUnlock: an Unlock whose delete is in flight when Close runs (Close
// cuts it short: its outcome is unknown) must not leave its node behind: the session survives the break, and nobody could Unlock the lease any more.
// The delete is held in the proxy until go-zookeeper gives the connection up (2/3 of
// the session timeout without an answer) and reconnects.
func TestCloseDuringUnlock(t *testing.T) {
	// The session must survive the reconnection, which comes after 2/3 st and
	// go-zookeeper's pause of a second before it dials its only server again.
	const st = 10 * time.Second
	a := newHeldClient(t, st)
	obs := newClient(t, standaloneAddrs(), sessionTimeout, nil, false).conn
	key := uniqueKey(t)
	lease, err := a.l.TryLock(ctxT(t), key, st)
	require.NoError(t, err)
	sid := a.conn.SessionID()
	h := a.hp.HoldNext()
	unlocked := make(chan error, 1)
	go func() { unlocked <- a.l.Unlock(context.Background(), lease) }()
	select {
	case <-h.Held():
	case <-time.After(5 * time.Second):
		t.Fatal("the Unlock's delete did not reach the proxy")
	}
	closed := time.Now()
	require.NoError(t, a.l.Close())
	t.Logf("Close returned after %v; Unlock: %v", time.Since(closed).Round(time.Millisecond), <-unlocked)
	// Close cut the Unlock short; its delete stays held until the connection breaks.
	require.Eventually(t, func() bool { return a.conn.State() != zk.StateHasSession }, st, 5*time.Millisecond,
		"go-zookeeper gives the held connection up")
	requireState(t, a.conn, zk.StateHasSession, 2*st)
	require.Equal(t, sid, a.conn.SessionID(), "the test needs the session to survive")
	require.Eventually(t, func() bool { return len(children(t, obs, keyPath(key))) == 0 }, 5*time.Second, 5*time.Millisecond,
		"the lock node of an Unlock in flight during Close is left with its session alive")
}

// TestCloseDuringTryLock: a TryLock that wins while Close runs returns an error
// wrapping ErrClosed (its lease could not be unlocked any more), and Close deletes
// the node.
func TestCloseDuringTryLock(t *testing.T) {
	a := newHeldClient(t, sessionTimeout)
	obs := newClient(t, standaloneAddrs(), sessionTimeout, nil, false).conn
	other, err := a.l.TryLock(ctxT(t), uniqueKey(t), sessionTimeout)
	require.NoError(t, err)
	lost := a.l.Lost(other) // closes as soon as Close has begun
	key := uniqueKey(t)
	h := a.hp.HoldNext()
	type result struct {
		lease distlock.Lease
		err   error
	}
	locked := make(chan result, 1)
	go func() {
		l, err := a.l.TryLock(context.Background(), key, sessionTimeout)
		locked <- result{l, err}
	}()
	select {
	case <-h.Held():
	case <-time.After(5 * time.Second):
		t.Fatal("the TryLock's create did not reach the proxy")
	}
	closed := make(chan error, 1)
	go func() { closed <- a.l.Close() }()
	select {
	case <-lost:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not begin")
	}
	h.Release()
	r := <-locked
	require.ErrorIs(t, r.err, distlock.ErrClosed, "TryLock that won during Close returned %+v", r.lease)
	require.NoError(t, <-closed)
	require.Equal(t, zk.StateHasSession, a.conn.State(), "the test needs the session alive")
	require.Eventually(t, func() bool { return len(children(t, obs, keyPath(key))) == 0 }, 5*time.Second, 5*time.Millisecond,
		"the node of a TryLock that won during Close is left")
	// The attempt ends once its node is deleted: closing the Session under one of
	// its requests would race in go-zookeeper (CreateContainer reads its response
	// after a request that the Close cut short).
	require.True(t, a.l.BackgroundDone(5*time.Second), "the attempt's goroutine ends")
}

// TestErrorsAreOpErrors: every method's errors are *distlock.OpError naming the
// backend, the method and the key, with the cause last, and a long key is not
// repeated in full.
func TestErrorsAreOpErrors(t *testing.T) {
	a := newClient(t, standaloneAddrs(), sessionTimeout, nil, false)
	b := newClient(t, standaloneAddrs(), sessionTimeout, nil, false)
	key := uniqueKey(t) + strings.Repeat("k", 500)
	lease, err := a.l.TryLock(ctxT(t), key, sessionTimeout)
	require.NoError(t, err)
	check := func(op string, err, cause error) {
		t.Helper()
		require.ErrorIs(t, err, cause, op)
		var oe *distlock.OpError
		require.ErrorAs(t, err, &oe, op)
		require.Equal(t, "zklock", oe.Backend, op)
		require.Equal(t, op, oe.Op)
		require.Equal(t, key, oe.Key, op)
		require.NotContains(t, err.Error(), key, "%s: the message holds the full key", op)
		require.NotContains(t, err.Error(), keyPath(key)[len(zklock.DefaultPrefix)+1:], "%s: the message holds the key's node name", op)
	}
	_, err = b.l.TryLock(ctxT(t), key, sessionTimeout)
	check("TryLock", err, distlock.ErrLocked)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	err = b.l.Wait(ctx, key)
	cancel()
	check("Wait", err, distlock.ErrLocked)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = b.l.TryLock(ctxT(t), key, 0)
	check("TryLock", err, distlock.ErrInvalid)
	forged := lease
	forged.Token = "not-a-token"
	_, err = b.l.Renew(ctxT(t), forged, sessionTimeout)
	check("Renew", err, distlock.ErrNotHeld)
	_, err = b.l.Renew(ctxT(t), lease, sessionTimeout)
	check("Renew", err, distlock.ErrNotHeld) // another session's node
	require.NoError(t, a.l.Unlock(ctxT(t), lease))
	check("Unlock", a.l.Unlock(ctxT(t), lease), distlock.ErrNotHeld)
	_, err = a.l.Inspect(ctxT(t), key)
	check("Inspect", err, distlock.ErrNotHeld)
	_, err = a.l.TryLock(ctxT(t), strings.Repeat("x", zklock.MaxKeyLen+1), time.Second)
	require.ErrorIs(t, err, distlock.ErrInvalid)
	require.Less(t, len(err.Error()), 200, "an oversized key in full in the message")
}
