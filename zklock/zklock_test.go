package zklock_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/zklock"
)

// ctxT returns a context for one call, bounded by 10s.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// uniqueKey returns a key no other test uses.
func uniqueKey(t *testing.T) string { return t.Name() + "-" + driver.NewToken()[:10] }

// keyPath is where the Locker keeps key under the default Prefix.
func keyPath(key string) string {
	return zklock.DefaultPrefix + "/" + base64.RawURLEncoding.EncodeToString([]byte(key))
}

// children lists path's children through conn (none when it does not exist). An
// error fails t, without stopping it: conditions of require.Eventually, which run
// in another goroutine, call it too.
func children(t *testing.T, conn *zk.Conn, path string) []string {
	t.Helper()
	ch, _, err := conn.Children(path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Errorf("Children(%s): %v", path, err)
	}
	return ch
}

func TestNewValidatesOptions(t *testing.T) {
	sess := connectSession(t, standaloneAddrs(), sessionTimeout)
	defer sess.Close()
	for _, tc := range []struct {
		name string
		sess *zklock.Session
		opts *zklock.Options
		want string
	}{
		{"nil session", nil, nil, "nil *zklock.Session"},
		{"zero session", &zklock.Session{}, nil, "nil *zklock.Session"},
		{"relative prefix", sess, &zklock.Options{Prefix: "distlock"}, `Options.Prefix "distlock"`},
		{"prefix with ..", sess, &zklock.Options{Prefix: "/a/../b"}, `Options.Prefix "/a/../b"`},
		{"reserved prefix", sess, &zklock.Options{Prefix: "/zookeeper/locks"}, `Options.Prefix "/zookeeper/locks"`},
		{"long owner", sess, &zklock.Options{Owner: strings.Repeat("o", zklock.MaxOwnerLen+1)}, "Options.Owner of 257 bytes"},
		{"negative grace", sess, &zklock.Options{DisconnectGrace: -1}, "Options.DisconnectGrace -1ns"},
		{"negative tick", sess, &zklock.Options{TickTime: -1}, "Options.TickTime -1ns"},
		// 2/3 of the granted 2s minus half a tick of 3s leaves nothing.
		{"tick leaves no validity", sess, &zklock.Options{TickTime: 3 * time.Second}, "Options.TickTime 3s"},
	} {
		l, err := zklock.New(tc.sess, tc.opts)
		require.Nil(t, l, tc.name)
		require.ErrorIs(t, err, distlock.ErrInvalid, tc.name)
		require.ErrorContains(t, err, tc.want, tc.name)
		var oe *distlock.OpError
		require.ErrorAs(t, err, &oe, tc.name)
		require.Equal(t, "zklock", oe.Backend, tc.name)
		require.Equal(t, "New", oe.Op, tc.name)
	}
	l, err := zklock.New(sess, nil)
	require.NoError(t, err, "nil Options are the defaults")
	require.NoError(t, l.Close())
}

// TestLayout: keys live as base64url-named container nodes under Prefix, lock nodes are
// protected ephemeral-sequential children holding the owner label, and the Fence is
// the lock node's czxid.
func TestLayout(t *testing.T) {
	root := "/distlock-layout/" + driver.NewToken()
	a := newClient(t, standaloneAddrs(), sessionTimeout, &zklock.Options{Prefix: root, Owner: "worker-7"}, false)
	obs := newClient(t, standaloneAddrs(), sessionTimeout, nil, false).conn
	key := "../../zookeeper/\x00"
	lease, err := a.l.TryLock(ctxT(t), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	kp := root + "/" + base64.RawURLEncoding.EncodeToString([]byte(key))
	names := children(t, obs, kp)
	if len(names) != 1 || !strings.HasPrefix(names[0], "_c_") || !strings.Contains(names[0], "-lock-") {
		t.Fatalf("children of %s = %v; want one protected lock node", kp, names)
	}
	data, stat, err := obs.Get(kp + "/" + names[0])
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != "worker-7" || stat.EphemeralOwner != a.conn.SessionID() || uint64(stat.Czxid) != lease.Fence {
		t.Fatalf("lock node data %q owner %#x czxid %d; want worker-7, session %#x, Fence %d", data, stat.EphemeralOwner, stat.Czxid, a.conn.SessionID(), lease.Fence)
	}
	if keys := children(t, obs, root); len(keys) != 1 {
		t.Fatalf("Prefix holds %v; want the one key node", keys)
	}
	h, err := a.l.Inspect(ctxT(t), key)
	if err != nil || h.Owner != "worker-7" || h.Fence != lease.Fence || h.Key != key {
		t.Fatalf("Inspect = %+v, %v", h, err)
	}
	if err := a.l.Unlock(ctxT(t), lease); err != nil {
		t.Fatal(err)
	}
	if names := children(t, obs, kp); len(names) != 0 {
		t.Fatalf("after Unlock %s has children %v", kp, names)
	}
}

// TestExpiresCappedBySession: Expires is start + min(ttl, 2/3 SessionTimeout -
// TickTime/2), TickTime SessionTimeout/2 by default; Renew past Expires still works
// while the session (and so the node) lives.
func TestExpiresCappedBySession(t *testing.T) {
	for _, tc := range []struct {
		tick, bound time.Duration
	}{
		{testenv.ZooKeeperTickTime, 2*sessionTimeout/3 - testenv.ZooKeeperTickTime/2},
		{sessionTimeout / 2, 5 * sessionTimeout / 12},
	} {
		a := newClient(t, standaloneAddrs(), sessionTimeout, &zklock.Options{TickTime: tc.tick}, false)
		key := uniqueKey(t)
		start := time.Now()
		lease, err := a.l.TryLock(ctxT(t), key, time.Hour)
		returned := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		if lease.Expires.Before(start.Add(tc.bound)) || lease.Expires.After(returned.Add(tc.bound)) {
			t.Fatalf("TickTime %v: Expires is %v from the start of a TryLock with ttl 1h (returned after %v); want %v", tc.tick, lease.Expires.Sub(start), returned.Sub(start), tc.bound)
		}
		start = time.Now()
		next, err := a.l.Renew(ctxT(t), lease, time.Hour)
		returned = time.Now()
		if err != nil {
			t.Fatal(err)
		}
		if next.Expires.Before(start.Add(tc.bound)) || next.Expires.After(returned.Add(tc.bound)) {
			t.Fatalf("TickTime %v: Expires is %v from the start of a Renew with ttl 1h (returned after %v); want %v", tc.tick, next.Expires.Sub(start), returned.Sub(start), tc.bound)
		}
		if err := a.l.Unlock(ctxT(t), next); err != nil {
			t.Fatal(err)
		}
	}
	a := newClient(t, standaloneAddrs(), sessionTimeout, nil, false)
	key := uniqueKey(t)
	lease, err := a.l.TryLock(ctxT(t), key, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	short, err := a.l.Renew(ctxT(t), lease, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(short.Expires) + time.Millisecond) // let the short lease lapse locally
	// The holder was told the lease ended: Renew does not revive it, even with the
	// session and the node alive; Unlock gives the node back.
	if _, err := a.l.Renew(ctxT(t), short, time.Minute); !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("Renew after Expires, with the session and node alive: got %v, want ErrNotHeld", err)
	}
	if err := a.l.Unlock(ctxT(t), short); err != nil {
		t.Fatal(err)
	}
}

// TestForeignChildrenIgnored: children that are not protected lock nodes do not
// block the key, and Inspect and Wait ignore them.
func TestForeignChildrenIgnored(t *testing.T) {
	a := newClient(t, standaloneAddrs(), sessionTimeout, nil, false)
	key := uniqueKey(t)
	kp := keyPath(key)
	acl := zk.WorldACL(zk.PermAll)
	for _, p := range []string{zklock.DefaultPrefix, kp} {
		if _, err := a.conn.Create(p, nil, zk.FlagPersistent, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"readme", "lock-0000000000", "_c_x-lock-1", "_c_x-read-0000000000"} {
		if _, err := a.conn.Create(kp+"/"+name, []byte("foreign"), zk.FlagPersistent, acl); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.conn.Delete(kp+"/"+name, -1) })
	}
	if _, err := a.l.Inspect(ctxT(t), key); !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("Inspect with only foreign children: %v; want ErrNotHeld", err)
	}
	if err := a.l.Wait(ctxT(t), key); err != nil {
		t.Fatalf("Wait with only foreign children: %v", err)
	}
	lease, err := a.l.TryLock(ctxT(t), key, time.Minute)
	if err != nil {
		t.Fatalf("TryLock with foreign children: %v", err)
	}
	if err := a.l.Unlock(ctxT(t), lease); err != nil {
		t.Fatal(err)
	}
	if got := len(children(t, a.conn, kp)); got != 4 {
		t.Fatalf("%d children left; want the 4 foreign ones untouched", got)
	}
}

// TestExcludesZkLock: go-zookeeper's own zk.Lock on a key's node is a contender:
// while it holds, TryLock fails, and the other way round.
func TestExcludesZkLock(t *testing.T) {
	a := newClient(t, standaloneAddrs(), sessionTimeout, nil, false)
	other := connect(t, standaloneAddrs(), sessionTimeout)
	defer other.Close()
	key := uniqueKey(t)
	zl := zk.NewLock(other, keyPath(key), zk.WorldACL(zk.PermAll))
	if err := zl.Lock(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.l.TryLock(ctxT(t), key, time.Minute); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock while zk.Lock holds the key's node: %v; want ErrLocked", err)
	}
	woke := make(chan error, 1)
	wctx := ctxT(t)
	go func() { woke <- a.l.Wait(wctx, key) }()
	if err := zl.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := <-woke; err != nil {
		t.Fatalf("Wait for zk.Lock's release: %v", err)
	}
	lease, err := a.l.TryLock(ctxT(t), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// A zklock waiter queues up first: zk.Lock must cope with its waiter node, and
	// with the lock node that the head waiter queues behind the holder, which comes
	// before zk.Lock's (with Options.WaitContends).
	b := newClient(t, standaloneAddrs(), sessionTimeout, &zklock.Options{WaitContends: true}, false)
	bwoke := make(chan error, 1)
	bctx := ctxT(t)
	go func() { bwoke <- b.l.Wait(bctx, key) }()
	require.Eventually(t, func() bool { return len(children(t, a.conn, keyPath(key))) == 3 }, 5*time.Second, 10*time.Millisecond, "the zklock waiter queued")
	got := make(chan error, 1)
	go func() { got <- zl.Lock() }()
	select {
	case err := <-got:
		t.Fatalf("zk.Lock returned (%v) while a zklock lease held the node", err)
	case <-time.After(200 * time.Millisecond): // zk.Lock blocks; it has no context
	}
	require.NoError(t, a.l.Unlock(ctxT(t), lease))
	require.NoError(t, <-bwoke)
	lb, err := b.l.TryLock(ctxT(t), key, time.Minute)
	require.NoError(t, err, "the head waiter's lock node came before zk.Lock's")
	require.Greater(t, lb.Fence, lease.Fence)
	select {
	case err := <-got:
		t.Fatalf("zk.Lock returned (%v) while the waiter's lease held the node", err)
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, b.l.Unlock(ctxT(t), lb))
	require.NoError(t, <-got, "zk.Lock with a zklock waiter on the node")
	_, err = b.l.TryLock(ctxT(t), key, time.Minute)
	require.ErrorIs(t, err, distlock.ErrLocked, "TryLock while zk.Lock holds")
	require.NoError(t, zl.Unlock())
	lb, err = b.l.TryLock(ctxT(t), key, time.Minute)
	require.NoError(t, err)
	require.NoError(t, b.l.Unlock(ctxT(t), lb))
}

// TestLostOnSessionEnd: closing the holder's connection ends the session; Lost
// closes and Renew says ErrNotHeld.
func TestLostOnSessionEnd(t *testing.T) {
	a := newClient(t, standaloneAddrs(), sessionTimeout, nil, false)
	b := newClient(t, standaloneAddrs(), sessionTimeout, nil, false)
	key := uniqueKey(t)
	lease, err := a.l.TryLock(ctxT(t), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	lost := a.l.Lost(lease)
	a.conn.Close()
	select {
	case <-lost:
	case <-time.After(5 * time.Second):
		t.Fatal("Lost still open 5s after the session was closed")
	}
	if _, err := a.l.Renew(ctxT(t), lease, time.Minute); err == nil {
		t.Fatal("Renew after the session was closed succeeded")
	}
	lb, err := b.l.TryLock(ctxT(t), key, time.Minute)
	if err != nil {
		t.Fatalf("TryLock after the holder's session ended: %v", err)
	}
	if lb.Fence <= lease.Fence {
		t.Fatalf("Fence %d not above %d", lb.Fence, lease.Fence)
	}
	if err := b.l.Unlock(ctxT(t), lb); err != nil {
		t.Fatal(err)
	}
}

// TestSuspendedIsLost: with the default DisconnectGrace, a dropped connection closes
// Lost (and cancels Hold's context) at once, even though the session survives a
// short cut; the Locker then deletes the lease's node, so the key is free for others
// and the lease is dead.
func TestSuspendedIsLost(t *testing.T) {
	a := newClient(t, standaloneAddrs(), sessionTimeout, nil, true)
	b := newClient(t, standaloneAddrs(), sessionTimeout, nil, false)
	key := uniqueKey(t)
	lease, err := a.l.TryLock(ctxT(t), key, sessionTimeout)
	if err != nil {
		t.Fatal(err)
	}
	held := distlock.Hold(t.Context(), a.l, lease, nil)
	session := a.conn.SessionID()
	a.cut()
	cut := time.Now()
	select {
	case <-held.Context().Done():
		t.Logf("Hold's context cancelled %v after the cut: %v", time.Since(cut), context.Cause(held.Context()))
	case <-time.After(sessionTimeout):
		t.Fatal("Hold's context still alive a session timeout after the connection was cut")
	}
	if !errors.Is(context.Cause(held.Context()), distlock.ErrNotHeld) {
		t.Fatalf("cause %v; want ErrNotHeld", context.Cause(held.Context()))
	}
	a.heal()
	requireState(t, a.conn, zk.StateHasSession, 10*time.Second)
	if a.conn.SessionID() != session {
		t.Fatalf("the session did not survive a short cut (%#x -> %#x); the test needs it to", session, a.conn.SessionID())
	}
	require.Eventually(t, func() bool {
		return len(children(t, b.conn, keyPath(key))) == 0
	}, 5*time.Second, 10*time.Millisecond, "the Locker deletes the node of a lease reported lost")
	if _, err := a.l.Renew(ctxT(t), lease, sessionTimeout); !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("Renew of a lease reported lost: %v; want ErrNotHeld", err)
	}
	if err := held.Release(ctxT(t)); !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("Release: %v; want the loss (ErrNotHeld)", err)
	}
	lb, err := b.l.TryLock(ctxT(t), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.l.Unlock(ctxT(t), lb); err != nil {
		t.Fatal(err)
	}
}

// TestLostLeaseKeptUntilExpires: the Locker deletes the node of a lease that it
// reported lost at a short disconnection (the session survives), but not before the
// lease's Expires: nobody else takes the key while a holder that did not heed Lost
// counts on it.
func TestLostLeaseKeptUntilExpires(t *testing.T) {
	const st = 4 * time.Second // Expires 2.57s ahead; the reconnection takes about a second
	a := newClient(t, standaloneAddrs(), st, nil, true)
	b := newClient(t, standaloneAddrs(), sessionTimeout, nil, false)
	key := uniqueKey(t)
	la, err := a.l.TryLock(ctxT(t), key, st)
	require.NoError(t, err)
	lost := a.l.Lost(la)
	sid := a.conn.SessionID()
	a.cut()
	select {
	case <-lost:
	case <-time.After(time.Until(la.Expires)):
		t.Fatal("Lost still open at the lease's Expires after the connection was cut")
	}
	a.heal()
	lb, acquired := contend(t, b.l, key, 10*time.Second)
	t.Logf("B's winning attempt began %v after A's Expires", acquired.Sub(la.Expires).Round(time.Millisecond))
	require.False(t, acquired.Before(la.Expires), "B acquired %v before the Expires of A's lease", la.Expires.Sub(acquired))
	require.Equal(t, sid, a.conn.SessionID(), "the test needs A's session to survive the cut")
	_, err = a.l.Renew(ctxT(t), la, st)
	require.ErrorIs(t, err, distlock.ErrNotHeld)
	require.NoError(t, b.l.Unlock(ctxT(t), lb))
}

// TestDisconnectGrace: with a DisconnectGrace, a cut shorter than it loses nothing.
func TestDisconnectGrace(t *testing.T) {
	st := 4 * time.Second
	a := newClient(t, standaloneAddrs(), st, &zklock.Options{DisconnectGrace: 3 * time.Second}, true)
	key := uniqueKey(t)
	lease, err := a.l.TryLock(ctxT(t), key, st)
	if err != nil {
		t.Fatal(err)
	}
	held := distlock.Hold(t.Context(), a.l, lease, nil)
	defer held.Release(context.Background())
	lost := a.l.Lost(lease)
	a.cut()
	requireState(t, a.conn, zk.StateConnecting, 5*time.Second)
	time.Sleep(300 * time.Millisecond) // a short outage, well within the grace
	a.heal()
	requireState(t, a.conn, zk.StateHasSession, 10*time.Second)
	select {
	case <-lost:
		t.Fatal("Lost closed after a disconnection shorter than DisconnectGrace")
	case <-held.Context().Done():
		t.Fatalf("Hold lost the lease: %v", context.Cause(held.Context()))
	default:
	}
	if _, err := a.l.Renew(ctxT(t), held.Lease(), st); err != nil {
		t.Fatalf("Renew after a short disconnection: %v", err)
	}
	if err := held.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(time.Second):
		t.Fatal("Lost still open after Release")
	}
}

// TestClose: after Close every method fails with an *OpError wrapping
// distlock.ErrClosed, Lost channels close, a second Close returns nil, and the key is
// free for others soon after the lease's Expires: the Locker deletes the node of a
// lease that Close left held (in the background), although the Session lives on.
func TestClose(t *testing.T) {
	a := newClient(t, standaloneAddrs(), sessionTimeout, nil, false)
	b := newClient(t, standaloneAddrs(), sessionTimeout, nil, false)
	key := uniqueKey(t)
	lease, err := a.l.TryLock(ctxT(t), key, time.Minute)
	require.NoError(t, err)
	lost := a.l.Lost(lease)
	require.NoError(t, a.l.Close())
	require.NoError(t, a.l.Close(), "a second Close")
	select {
	case <-lost:
	default:
		t.Fatal("Lost open after Close")
	}
	requireClosed := func(op string, err error) {
		t.Helper()
		require.ErrorIs(t, err, distlock.ErrClosed, op)
		var oe *distlock.OpError
		require.ErrorAs(t, err, &oe, op)
		require.Equal(t, op, oe.Op)
		require.Equal(t, key, oe.Key, op)
	}
	_, err = a.l.TryLock(ctxT(t), key, time.Minute)
	requireClosed("TryLock", err)
	_, err = a.l.Renew(ctxT(t), lease, time.Minute)
	requireClosed("Renew", err)
	requireClosed("Unlock", a.l.Unlock(ctxT(t), lease))
	requireClosed("Wait", a.l.Wait(ctxT(t), key))
	_, err = a.l.Inspect(ctxT(t), key)
	requireClosed("Inspect", err)
	require.Equal(t, zk.StateHasSession, a.conn.State(), "the test needs A's session alive")
	lb, _ := contend(t, b.l, key, 5*time.Second) // Close deletes the node in the background
	require.NoError(t, b.l.Unlock(ctxT(t), lb))
}

// TestCloseReleasesUnwatchedLeases: after Close the Locker deletes the node of every
// lease it held, once its Expires has passed, not only of those watched through
// Lost, so that no key stays locked for the rest of a session that outlives the
// Locker (nobody could Unlock it).
func TestCloseReleasesUnwatchedLeases(t *testing.T) {
	a := newClient(t, standaloneAddrs(), sessionTimeout, nil, false)
	key := uniqueKey(t)
	_, err := a.l.TryLock(ctxT(t), key, time.Minute)
	require.NoError(t, err)
	require.NoError(t, a.l.Close())
	require.Equal(t, zk.StateHasSession, a.conn.State(), "the test needs A's session alive")
	require.Eventually(t, func() bool { return len(children(t, a.conn, keyPath(key))) == 0 }, 5*time.Second, 5*time.Millisecond,
		"lock nodes left after Close with the session open")
}

// TestWaitCancelled: a Wait whose context ends while the key is held returns
// errors.Join(ErrLocked, ctx.Err()), whichever of Wait and its queue notices the end
// first (the queue's own "abandoned" must not leak out).
func TestWaitCancelled(t *testing.T) {
	a := newClient(t, standaloneAddrs(), sessionTimeout, nil, false)
	b := newClient(t, standaloneAddrs(), sessionTimeout, nil, false)
	key := uniqueKey(t)
	lease, err := a.l.TryLock(ctxT(t), key, time.Minute)
	require.NoError(t, err)
	for i := range 50 {
		ctx, cancel := context.WithTimeout(t.Context(), time.Duration(5+i%10)*time.Millisecond)
		err := b.l.Wait(ctx, key)
		cancel()
		require.ErrorIs(t, err, distlock.ErrLocked, "Wait %d", i)
		require.ErrorIs(t, err, context.DeadlineExceeded, "Wait %d", i)
	}
	// The cancelled Waits' nodes (waiter nodes, and the lock nodes that the first
	// waiters make) are gone: only the holder's is left.
	require.Eventually(t, func() bool { return len(children(t, a.conn, keyPath(key))) == 1 }, 5*time.Second, 10*time.Millisecond,
		"nodes left: %v", children(t, a.conn, keyPath(key)))
	require.NoError(t, a.l.Unlock(ctxT(t), lease))
}

// TestWaitQueue: waiters queue up; a release wakes only the head (no herd), in the
// order they came; a head that does not follow up with TryLock leaves the queue within
// a second.
func TestWaitQueue(t *testing.T) {
	const n = 4
	a := newClient(t, standaloneAddrs(), sessionTimeout, nil, false)
	key := uniqueKey(t)
	kp := keyPath(key)
	la, err := a.l.TryLock(ctxT(t), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	waiters := make([]*client, n)
	woke := make([]chan error, n)
	waitersQueued := func(k int) func() bool {
		return func() bool {
			q := 0
			for _, name := range children(t, a.conn, kp) {
				if strings.HasPrefix(name, "_w_") {
					q++
				}
			}
			return q == k
		}
	}
	for i := range waiters {
		waiters[i] = newClient(t, standaloneAddrs(), sessionTimeout, nil, false)
		woke[i] = make(chan error, 1)
		ctx := ctxT(t)
		go func() { woke[i] <- waiters[i].l.Wait(ctx, key) }()
		require.Eventually(t, waitersQueued(i+1), 5*time.Second, 10*time.Millisecond, fmt.Sprintf("waiter %d queued", i))
	}
	// expectWoken checks that waiter i wakes, and that none of the waiters behind
	// it wakes within 200ms after it.
	expectWoken := func(i int, what string) {
		t.Helper()
		select {
		case err := <-woke[i]:
			if err != nil {
				t.Fatalf("waiter %d after %s: %v", i, what, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("waiter %d not woken 5s after %s", i, what)
		}
		time.Sleep(200 * time.Millisecond) // a quiet period: nobody else may wake in it
		for j := i + 1; j < n; j++ {
			select {
			case err := <-woke[j]:
				t.Fatalf("waiter %d woke (%v) after %s, before the waiters ahead of it had their turn", j, err, what)
			default:
			}
		}
	}
	if err := a.l.Unlock(ctxT(t), la); err != nil {
		t.Fatal(err)
	}
	expectWoken(0, "the holder's Unlock")
	l0, err := waiters[0].l.TryLock(ctxT(t), key, time.Minute)
	if err != nil {
		t.Fatalf("the woken head's TryLock: %v", err)
	}
	require.Eventually(t, waitersQueued(n-1), 5*time.Second, 10*time.Millisecond, "the head's waiter node removed by its TryLock")
	select {
	case err := <-woke[1]:
		t.Fatalf("waiter 1 woke (%v) while waiter 0 holds the key", err)
	default:
	}
	if err := waiters[0].l.Unlock(ctxT(t), l0); err != nil {
		t.Fatal(err)
	}
	expectWoken(1, "waiter 0's Unlock")
	// Waiter 1 does not call TryLock: its place lapses after the claim window, and
	// waiter 2, now at the head with no holder, finds the key free.
	start := time.Now()
	expectWoken(2, "waiter 1 let its turn pass")
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("waiter 2 woke %v after waiter 1 let its turn pass", d)
	}
	expectWoken(3, "waiter 2 let its turn pass too")
	require.Eventually(t, waitersQueued(0), 5*time.Second, 10*time.Millisecond, "the lapsed waiter nodes removed")
	require.Eventually(t, func() bool { return len(children(t, a.conn, kp)) == 0 }, 5*time.Second, 10*time.Millisecond,
		"the lapsed waiters' lock nodes removed")
}
