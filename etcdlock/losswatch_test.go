package etcdlock_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/faultproxy"
	"github.com/stretchr/testify/require"
)

// TestLostAfterCompaction: while the holder's connection is cut, its key is
// deleted and the history of that is compacted. Once the connection heals, the
// Locker's shared watch cannot resume (ErrCompacted): it starts anew and reads the
// key of every acquisition it watches, so Lost closes for the deleted key and
// stays open for one that is still held.
func TestLostAfterCompaction(t *testing.T) {
	p, err := faultproxy.New(etcdSrv.Addr(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	a := newLocker(t, newClient(t, []string{p.Addr()}, nil), &etcdlock.Options{Owner: "a"})
	cli := newClient(t, []string{etcdSrv.Addr()}, nil)
	pfx := "compact-" + driver.NewToken()
	gone, kept := pfx+"-gone", pfx+"-kept"
	lg, err := a.TryLock(ctxFor(t, 5*time.Second), gone, 30*time.Second)
	require.NoError(t, err)
	lk, err := a.TryLock(ctxFor(t, 5*time.Second), kept, 30*time.Second)
	require.NoError(t, err)
	lostGone, lostKept := a.Lost(lg), a.Lost(lk)
	// The watch started: an Unlock of a third key closes its Lost channel through it.
	lt, err := a.TryLock(ctxFor(t, 5*time.Second), pfx+"-third", 30*time.Second)
	require.NoError(t, err)
	lostThird := a.Lost(lt)
	_, err = cli.Delete(ctxFor(t, 5*time.Second), a.EtcdKey(pfx+"-third"))
	require.NoError(t, err)
	waitClosed(t, lostThird, 5*time.Second, "the deleted third key")

	p.Cut()
	_, err = cli.Delete(ctxFor(t, 5*time.Second), a.EtcdKey(gone))
	require.NoError(t, err)
	put, err := cli.Put(ctxFor(t, 5*time.Second), "compact-filler-"+driver.NewToken(), "x")
	require.NoError(t, err)
	_, err = cli.Compact(ctxFor(t, 5*time.Second), put.Header.Revision)
	require.NoError(t, err)
	select {
	case <-lostGone:
		t.Fatal("Lost closed while the holder's connection was cut")
	default:
	}
	p.Heal()
	waitClosed(t, lostGone, 10*time.Second, "the key deleted during the cut")
	// A round trip after the check that closed lostGone: lostKept is still open.
	_, err = a.Renew(ctxFor(t, 5*time.Second), lk, 30*time.Second)
	require.NoError(t, err)
	select {
	case <-lostKept:
		t.Fatal("Lost closed for a key that is still held")
	default:
	}
	require.NoError(t, a.Unlock(ctxFor(t, 5*time.Second), lk))
	waitClosed(t, lostKept, 5*time.Second, "the released key")
}

// TestLostSharesOneWatch: the Lost channels of many acquisitions share one
// watch, so they add no goroutine each; Lost of an acquisition that ended before
// it was asked about (after the watch passed its Fence) closes, through a read of
// its key; an acquisition whose key another Locker recreated closes.
func TestLostSharesOneWatch(t *testing.T) {
	cli := newClient(t, []string{etcdSrv.Addr()}, nil)
	a := newLocker(t, cli, &etcdlock.Options{Owner: "a"})
	b := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), &etcdlock.Options{Owner: "b"})
	pfx := "share-" + driver.NewToken()
	first, err := a.TryLock(ctxFor(t, 5*time.Second), pfx+"-first", 30*time.Second)
	require.NoError(t, err)
	a.Lost(first) // starts the watch
	const n = 200
	leases := make([]distlock.Lease, n)
	lost := make([]<-chan struct{}, n)
	for i := range leases {
		leases[i], err = a.TryLock(ctxFor(t, 5*time.Second), fmt.Sprintf("%s-%d", pfx, i), 30*time.Second)
		require.NoError(t, err)
	}
	// Counted around the Lost calls only: the goroutines that the TryLocks, or
	// the test binary's other work, start or end meanwhile are not Lost's.
	g0 := runtime.NumGoroutine()
	for i := range leases {
		if i != 1 {
			lost[i] = a.Lost(leases[i])
		}
	}
	if g := runtime.NumGoroutine() - g0; g > 10 {
		t.Fatalf("%d Lost channels added %d goroutines", n, g)
	}
	// Released behind the Locker's back (another Locker's Unlock of the same
	// Lease), and one recreated by b.
	require.NoError(t, b.Unlock(ctxFor(t, 5*time.Second), leases[0]))
	waitClosed(t, lost[0], 5*time.Second, "a key released by another Locker")
	require.NoError(t, b.Unlock(ctxFor(t, 5*time.Second), leases[1]))
	lb, err := b.TryLock(ctxFor(t, 5*time.Second), leases[1].Key, 30*time.Second)
	require.NoError(t, err)
	// Asked about after the watch passed the release: a read tells.
	late := make(chan struct{})
	a.AfterLost(leases[1], func() { close(late) })
	waitClosed(t, late, 5*time.Second, "an acquisition that ended before AfterLost")
	for i := 2; i < n; i++ {
		select {
		case <-lost[i]:
			t.Fatalf("Lost %d closed while held", i)
		default:
		}
	}
	require.NoError(t, b.Unlock(ctxFor(t, 5*time.Second), lb))
	for i := 2; i < n; i++ {
		require.NoError(t, a.Unlock(ctxFor(t, 5*time.Second), leases[i]))
		waitClosed(t, lost[i], 5*time.Second, "a released key")
	}
}

// waitClosed fails t unless ch closes within d.
func waitClosed(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("Lost not closed within %v for %s", d, what)
	}
}
