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

// TestRenewMoveReplyAfterExpires: a Renew with a longer ttl that moves the key to
// a new lease, and whose move's reply comes after the Lease's Expires, does not
// count (Renew never revives a lease): it returns an error, not ErrNotHeld, since
// the server holds the key. It must not free the key: a copy of the Lease renewed
// in time meanwhile still holds it (the explorer found a revocation here letting
// a second holder in).
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
	first, err := l.TryLock(ctxFor(t, 5*time.Second), key, lateTTL)
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond)
	second, err := l.Renew(ctxFor(t, 5*time.Second), first, lateTTL)
	require.NoError(t, err)
	late := first.Expires.Add(20 * time.Millisecond)
	until.Store(&late)

	renewed, err := l.Renew(ctxFor(t, 5*time.Second), first, 5*time.Second)
	require.Nil(t, until.Load(), "the Renew sent no Txn")
	require.Error(t, err, "Renew whose move was answered after Expires (returned %+v)", renewed)
	require.NotErrorIs(t, err, distlock.ErrNotHeld, "the server holds the key")
	require.True(t, time.Now().Before(second.Expires), "the test was too slow to check the second copy in time")
	other := newLocker(t, newClient(t, eps, nil), nil)
	_, err = other.TryLock(ctxFor(t, 5*time.Second), key, time.Second)
	require.ErrorIs(t, err, distlock.ErrLocked, "the late move freed the key of a copy still held")
	third, err := l.Renew(ctxFor(t, 5*time.Second), second, lateTTL)
	require.NoError(t, err, "the copy renewed in time")
	require.NoError(t, l.Unlock(ctxFor(t, 5*time.Second), third))
	_, err = other.TryLock(ctxFor(t, 5*time.Second), key, time.Second)
	require.NoError(t, err, "Unlock left the key on the moved lease")
}

// TestRenewLateRefresh: a Renew whose refresh is answered after the Lease's
// Expires does not count, although the server still held the lease and refreshed
// it: the holder was told the lease ended at Expires, and Renew never revives a
// lease. It returns an error that is not ErrNotHeld (the server holds the key),
// and leaves the key to a copy of the Lease renewed in time meanwhile.
func TestRenewLateRefresh(t *testing.T) {
	t.Parallel()
	p, err := faultproxy.New(etcdSrv.Addr(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	a := newLocker(t, newClient(t, []string{p.Addr()}, nil), nil)
	key := "late-refresh-" + driver.NewToken()
	// A ttl of 1.5s on a lease of 2s: the server still holds the lease when the
	// refresh arrives, 100ms after the first copy's Expires.
	const ttl = 1500 * time.Millisecond
	first, err := a.TryLock(ctxFor(t, 5*time.Second), key, ttl)
	require.NoError(t, err)
	time.Sleep(500 * time.Millisecond)
	second, err := a.Renew(ctxFor(t, 5*time.Second), first, ttl)
	require.NoError(t, err)
	// The Renew of the first copy starts 200ms before its Expires.
	start := time.NewTimer(time.Until(first.Expires.Add(-200 * time.Millisecond)))
	<-start.C
	p.Stall()
	done := make(chan error, 1)
	go func() {
		_, err := a.Renew(ctxFor(t, 5*time.Second), first, ttl)
		done <- err
	}()
	heal := time.NewTimer(time.Until(first.Expires.Add(100 * time.Millisecond)))
	<-heal.C
	p.Heal()
	err = <-done
	require.Error(t, err, "a refresh answered after Expires counted")
	require.NotErrorIs(t, err, distlock.ErrNotHeld, "the server holds the key")
	require.True(t, time.Now().Before(second.Expires), "the test was too slow to check the second copy in time")
	b := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), nil)
	_, err = b.TryLock(ctxFor(t, time.Second), key, ttl)
	require.ErrorIs(t, err, distlock.ErrLocked, "the late refresh freed the key of a copy still held")
	_, err = a.Renew(ctxFor(t, 5*time.Second), second, ttl)
	require.NoError(t, err, "the copy renewed in time")
}
