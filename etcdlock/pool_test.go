package etcdlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/etcdlock"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// leaseTTL returns the remaining TTL of the etcd lease id (-1: gone).
func leaseTTL(t *testing.T, cli *clientv3.Client, id clientv3.LeaseID) int64 {
	t.Helper()
	resp, err := cli.TimeToLive(ctxFor(t, 5*time.Second), id)
	require.NoError(t, err)
	return resp.TTL
}

// TestUnlockKeepsLease: Unlock is one round trip and keeps the key's etcd lease as
// a spare; the next TryLock with the same whole seconds puts its key on that lease
// in one round trip, with an Expires no later than the lease's grant plus its TTL;
// a TryLock with other whole seconds grants a lease of its own.
func TestUnlockKeepsLease(t *testing.T) {
	var c rttCounter
	cli := newClient(t, []string{etcdSrv.Addr()}, &c)
	l := newLocker(t, cli, nil)
	const ttl = 10 * time.Second
	k1, k2, k3 := "keep-1-"+driver.NewToken(), "keep-2-"+driver.NewToken(), "keep-3-"+driver.NewToken()
	la, err := l.TryLock(ctxFor(t, 5*time.Second), k1, ttl)
	require.NoError(t, err)
	granted := time.Now() // after the grant was sent
	id, _ := leaseOf(t, cli, l, k1)
	before := c.Load()
	require.NoError(t, l.Unlock(ctxFor(t, 5*time.Second), la))
	require.EqualValues(t, 1, c.Load()-before, "Unlock's round trips")
	require.Positive(t, leaseTTL(t, cli, id), "the lease after Unlock: want it kept")

	before = c.Load()
	lb, err := l.TryLock(ctxFor(t, 5*time.Second), k2, ttl)
	require.NoError(t, err)
	require.EqualValues(t, 1, c.Load()-before, "TryLock's round trips with a spare lease")
	got, _ := leaseOf(t, cli, l, k2)
	require.Equal(t, id, got, "the key's lease: want the spare")
	require.False(t, lb.Expires.After(granted.Add(ttl)), "Expires %v after the spare's grant + ttl", lb.Expires.Sub(granted.Add(ttl)))

	lc, err := l.TryLock(ctxFor(t, 5*time.Second), k3, 2*ttl)
	require.NoError(t, err)
	other, secs := leaseOf(t, cli, l, k3)
	require.NotEqual(t, id, other)
	require.EqualValues(t, 20, secs)
	require.NoError(t, l.Unlock(ctxFor(t, 5*time.Second), lb))
	require.NoError(t, l.Unlock(ctxFor(t, 5*time.Second), lc))
}

// TestStaleSpareRefreshed: a spare whose expiry would cut the next Lease short by
// more than a tenth of its ttl is refreshed (KeepAliveOnce) before TryLock uses it,
// and the Lease then gets its full ttl.
func TestStaleSpareRefreshed(t *testing.T) {
	var c rttCounter
	cli := newClient(t, []string{etcdSrv.Addr()}, &c)
	l := newLocker(t, cli, nil)
	const ttl = 2 * time.Second
	k1, k2 := "stale-1-"+driver.NewToken(), "stale-2-"+driver.NewToken()
	la, err := l.TryLock(ctxFor(t, 5*time.Second), k1, ttl)
	require.NoError(t, err)
	id, _ := leaseOf(t, cli, l, k1)
	require.NoError(t, l.Unlock(ctxFor(t, 5*time.Second), la))
	time.Sleep(ttl/10 + 200*time.Millisecond)

	before, start := c.Load(), time.Now()
	lb, err := l.TryLock(ctxFor(t, 5*time.Second), k2, ttl)
	require.NoError(t, err)
	require.EqualValues(t, 2, c.Load()-before, "TryLock's round trips (LeaseKeepAlive, Txn)")
	got, _ := leaseOf(t, cli, l, k2)
	require.Equal(t, id, got, "the key's lease: want the refreshed spare")
	require.False(t, lb.Expires.Before(start.Add(ttl)), "Expires %v before the call's start + ttl", start.Add(ttl).Sub(lb.Expires))
	require.NoError(t, l.Unlock(ctxFor(t, 5*time.Second), lb))
}

// TestCloseRevokesSpares: Close revokes every spare lease: those of released keys
// and that of a TryLock that found its key held.
func TestCloseRevokesSpares(t *testing.T) {
	cli := newClient(t, []string{etcdSrv.Addr()}, nil)
	other := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), nil)
	l, err := etcdlock.New(cli, nil)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	var ids []clientv3.LeaseID
	for i := range 3 {
		key := "spares-" + driver.NewToken()
		lease, err := l.TryLock(ctxFor(t, 5*time.Second), key, time.Duration(10+i)*time.Second)
		require.NoError(t, err)
		id, _ := leaseOf(t, cli, l, key)
		ids = append(ids, id)
		require.NoError(t, l.Unlock(ctxFor(t, 5*time.Second), lease))
	}
	key := "spares-held-" + driver.NewToken()
	lo, err := other.TryLock(ctxFor(t, 5*time.Second), key, time.Minute)
	require.NoError(t, err)
	before := leaseIDs(t, cli)
	_, err = l.TryLock(ctxFor(t, 5*time.Second), key, time.Minute)
	require.ErrorIs(t, err, distlock.ErrLocked)
	for id := range leaseIDs(t, cli) {
		if !before[id] {
			ids = append(ids, id)
		}
	}
	require.Len(t, ids, 4)
	for _, id := range ids {
		require.Positive(t, leaseTTL(t, cli, id))
	}
	require.NoError(t, l.Close())
	for _, id := range ids {
		require.EqualValues(t, -1, leaseTTL(t, cli, id), "spare %x after Close", id)
	}
	require.NoError(t, other.Unlock(ctxFor(t, 5*time.Second), lo))
}

// TestUnsureLeaseNotKept: when an attempt of the TryLock's transaction fails with
// an unknown outcome (here it took effect, but its reply was lost), a late copy of
// it could still create the key on the lease after the key's Unlock; Unlock then
// revokes the lease instead of keeping it.
func TestUnsureLeaseNotKept(t *testing.T) {
	eps := []string{etcdSrv.Addr()}
	var lose atomic.Bool
	cli := newClientWith(t, eps, onUnary(methodTxn, func(ctx context.Context, invoke func() error) error {
		err := invoke()
		if err == nil && lose.CompareAndSwap(true, false) {
			return status.Error(codes.Unavailable, "test: the reply was lost")
		}
		return err
	}))
	l := newLocker(t, cli, nil)
	key := "unsure-" + driver.NewToken()
	lose.Store(true)
	lease, err := l.TryLock(ctxFor(t, 5*time.Second), key, 10*time.Second)
	require.NoError(t, err)
	id, _ := leaseOf(t, cli, l, key)
	require.NoError(t, l.Unlock(ctxFor(t, 5*time.Second), lease))
	require.Eventually(t, func() bool { return leaseTTL(t, cli, id) == -1 }, 5*time.Second, 10*time.Millisecond,
		"the lease of a TryLock with a lost reply, after Unlock: want it revoked")
}

// TestForgedUnlockOnHolder: on the Locker that holds a key, an Unlock of a Lease
// with the key's Key and Fence but another token says ErrNotHeld and leaves the
// key and its etcd lease alone (the Locker's record of the acquisition is not
// the caller's).
func TestForgedUnlockOnHolder(t *testing.T) {
	cli := newClient(t, []string{etcdSrv.Addr()}, nil)
	l := newLocker(t, cli, nil)
	key := "forged-" + driver.NewToken()
	lease, err := l.TryLock(ctxFor(t, 5*time.Second), key, 10*time.Second)
	require.NoError(t, err)
	id, _ := leaseOf(t, cli, l, key)
	forged := lease
	forged.Token = driver.NewToken()
	require.ErrorIs(t, l.Unlock(ctxFor(t, 5*time.Second), forged), distlock.ErrNotHeld)
	got, _ := leaseOf(t, cli, l, key)
	require.Equal(t, id, got)
	require.Positive(t, leaseTTL(t, cli, id))
	require.NoError(t, l.Unlock(ctxFor(t, 5*time.Second), lease))
}

// TestUnlockAfterMoveElsewhere: another Locker's Renew moved the key to a lease of
// its own; the holder's Unlock, whose record of the lease is stale, still releases
// the key (by the token) and revokes that lease rather than keeping it.
func TestUnlockAfterMoveElsewhere(t *testing.T) {
	cli := newClient(t, []string{etcdSrv.Addr()}, nil)
	a, b := newLocker(t, cli, nil), newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), nil)
	key := "moved-" + driver.NewToken()
	lease, err := a.TryLock(ctxFor(t, 5*time.Second), key, 10*time.Second)
	require.NoError(t, err)
	first, _ := leaseOf(t, cli, a, key)
	lease, err = b.Renew(ctxFor(t, 5*time.Second), lease, 20*time.Second)
	require.NoError(t, err)
	moved, _ := leaseOf(t, cli, a, key)
	require.NotEqual(t, first, moved)
	require.NoError(t, a.Unlock(ctxFor(t, 5*time.Second), lease))
	_, err = a.Inspect(ctxFor(t, 5*time.Second), key)
	require.ErrorIs(t, err, distlock.ErrNotHeld)
	require.Eventually(t, func() bool { return leaseTTL(t, cli, moved) == -1 }, 5*time.Second, 10*time.Millisecond,
		"the lease that b's Renew moved the key to, after a's Unlock: want it revoked")
}
