package etcdlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/faultproxy"
	"github.com/stretchr/testify/require"
)

// lateTTL is the ttl of the leases of the tests below: shorter than the etcd
// lease's TTL (whole seconds, at least 1s with testenv's election timeout), so
// that etcd still holds the key for a while after the Lease's Expires, as it does
// for up to its 500ms expiry check after any lease's TTL.
const lateTTL = 300 * time.Millisecond

// sleepPast sleeps until d after t.
func sleepPast(t time.Time, d time.Duration) { time.Sleep(time.Until(t.Add(d))) }

// TestRenewAfterExpires (issue 28, item 6a): a Renew that starts after the Lease's
// Expires, while etcd still holds the key on the lease, returns ErrNotHeld on both
// of its paths: a refresh of the key's lease (ttl not longer than the lease's TTL)
// and a move of the key to a new lease (a longer ttl): Renew never revives a
// lease whose holder was told it ended.
func TestRenewAfterExpires(t *testing.T) {
	for _, tc := range []struct {
		name string
		ttl  time.Duration
	}{
		{"refresh", lateTTL},
		{"move", 5 * time.Second},
	} {
		for _, other := range []bool{false, true} {
			name := tc.name
			if other {
				name += "/another Locker"
			}
			t.Run(name, func(t *testing.T) {
				cli := newClient(t, []string{etcdSrv.Addr()}, nil)
				l := newLocker(t, cli, nil)
				r := l
				if other { // a Locker that did not record the acquisition
					r = newLocker(t, cli, nil)
				}
				key := "renew-late-" + driver.NewToken()
				lease, err := l.TryLock(ctxFor(t, 5*time.Second), key, lateTTL)
				require.NoError(t, err)
				sleepPast(lease.Expires, 50*time.Millisecond)
				get, err := cli.Get(ctxFor(t, 5*time.Second), l.EtcdKey(key))
				require.NoError(t, err)
				require.Len(t, get.Kvs, 1, "etcd no longer holds the key: the test cannot reach the window")

				renewed, err := r.Renew(ctxFor(t, 5*time.Second), lease, tc.ttl)
				require.ErrorIs(t, err, distlock.ErrNotHeld, "Renew %v after Expires (returned %+v)", time.Since(lease.Expires), renewed)
			})
		}
	}
}

// TestRenewMoveReplyAfterExpires (issue 28, item 6a): a Renew with a longer ttl
// that moves the key to a new lease, and whose move's reply comes after the
// Lease's Expires, returns ErrNotHeld, as a refresh answered that late does, and
// frees the key instead of leaving it on the new lease under a token that no one
// holds.
func TestRenewMoveReplyAfterExpires(t *testing.T) {
	eps := []string{etcdSrv.Addr()}
	var until atomic.Pointer[time.Time] // once set, the next Txn's reply waits until then
	cli := newClientWith(t, eps, onUnary(methodTxn, func(_ context.Context, invoke func() error) error {
		err := invoke()
		if t := until.Swap(nil); t != nil {
			time.Sleep(time.Until(*t))
		}
		return err
	}))
	l := newLocker(t, cli, nil)
	key := "renew-move-late-" + driver.NewToken()
	lease, err := l.TryLock(ctxFor(t, 5*time.Second), key, lateTTL)
	require.NoError(t, err)
	late := lease.Expires.Add(20 * time.Millisecond)
	until.Store(&late)

	renewed, err := l.Renew(ctxFor(t, 5*time.Second), lease, 5*time.Second)
	require.Nil(t, until.Load(), "the Renew sent no Txn")
	require.ErrorIs(t, err, distlock.ErrNotHeld, "Renew whose move was answered after Expires (returned %+v)", renewed)
	// The key is free long before the 5s of the new lease, and the old lease's TTL.
	other := newLocker(t, newClient(t, eps, nil), nil)
	_, err = other.TryLock(ctxFor(t, 5*time.Second), key, time.Second)
	require.NoError(t, err, "the key stayed held after the late move")
}

// TestRenewLateRefresh: a Renew whose refresh is answered after the Lease's
// Expires returns ErrNotHeld, although the server still held the lease and
// refreshed it: the holder was told the lease ended at Expires, and Renew never
// revives a lease.
func TestRenewLateRefresh(t *testing.T) {
	t.Parallel()
	p, err := faultproxy.New(etcdSrv.Addr(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	a := newLocker(t, newClient(t, []string{p.Addr()}, nil), nil)
	key := "late-refresh-" + driver.NewToken()
	// A ttl of 1.5s on a lease of 2s: the server still holds the lease when the
	// refresh arrives, 100ms after the Lease's Expires.
	const ttl = 1500 * time.Millisecond
	la, err := a.TryLock(ctxFor(t, 5*time.Second), key, ttl)
	require.NoError(t, err)
	// The Renew starts 200ms before Expires: its own Expires would be 1.3s
	// after the old one.
	start := time.NewTimer(time.Until(la.Expires.Add(-200 * time.Millisecond)))
	<-start.C
	p.Stall()
	done := make(chan error, 1)
	go func() {
		_, err := a.Renew(ctxFor(t, 5*time.Second), la, ttl)
		done <- err
	}()
	heal := time.NewTimer(time.Until(la.Expires.Add(100 * time.Millisecond)))
	<-heal.C
	p.Heal()
	require.ErrorIs(t, <-done, distlock.ErrNotHeld)
	// The refresh reached the server: its lease would hold the key 2s from the
	// heal on. The refused Renew revokes it, so the key frees at once.
	b := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), nil)
	free := la.Expires.Add(time.Second)
	require.Eventually(t, func() bool {
		_, err := b.TryLock(ctxFor(t, time.Second), key, ttl)
		return err == nil
	}, time.Until(free), 20*time.Millisecond, "the key was still held a second after the Lease's Expires")
}
