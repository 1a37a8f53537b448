package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/faultproxy"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestKeyEncoding(t *testing.T) {
	l := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), &etcdlock.Options{Prefix: "app"})
	if got := l.EtcdKey("a/b%c\x00d ключ"); got != "app/a%2Fb%25c%00d ключ" {
		t.Fatalf("EtcdKey = %q", got)
	}
	keys := []string{"a", "A", "a/b", "a%2Fb", "a%2fb", "a%252Fb", "a/", "/a", "a\x00", "a%00", "%", "%25", "\x7f", "%7F", "\xff"}
	seen := make(map[string]string)
	for _, k := range keys {
		ek := l.EtcdKey(k)
		if !strings.HasPrefix(ek, "app/") || strings.Contains(ek[len("app/"):], "/") {
			t.Errorf("EtcdKey(%q) = %q: not one segment under the prefix", k, ek)
		}
		if other, ok := seen[ek]; ok {
			t.Errorf("keys %q and %q both map to %q", other, k, ek)
		}
		seen[ek] = k
	}
}

// TestRoundTrips pins the number of requests each call sends to the server.
func TestRoundTrips(t *testing.T) {
	var c rttCounter
	l := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, &c), nil)
	other := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), nil)
	key := "rtt-" + driver.NewToken()
	count := func(what string, want int64, f func() error) {
		t.Helper()
		before := c.Load()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := c.Load() - before; got != want {
			t.Errorf("%s took %d round trips, want %d", what, got, want)
		}
	}
	var lease distlock.Lease
	count("TryLock of a free key", 2, func() (err error) {
		lease, err = l.TryLock(ctxFor(t, 5*time.Second), key, 3*time.Second)
		return err
	})
	// LeaseKeepAlive, Range (the key is still on the
	// refreshed lease; a Txn of Gets, shared with concurrent Renews).
	count("Renew with the same ttl", 2, func() (err error) {
		lease, err = l.Renew(ctxFor(t, 5*time.Second), lease, 3*time.Second)
		return err
	})
	count("Renew with a longer ttl", 4, func() (err error) {
		lease, err = l.Renew(ctxFor(t, 5*time.Second), lease, 5*time.Second)
		return err
	})
	count("Renew with a shorter ttl", 2, func() (err error) {
		lease, err = l.Renew(ctxFor(t, 5*time.Second), lease, 2*time.Second)
		return err
	})
	count("Inspect", 2, func() error {
		_, err := l.Inspect(ctxFor(t, 5*time.Second), key)
		return err
	})
	// The first attempt on a held key grants a lease and keeps it; the next (with
	// the same whole seconds, within a tenth of the ttl) uses it.
	count("TryLock of a held key", 2, func() error {
		if _, err := l.TryLock(ctxFor(t, 5*time.Second), key, 30*time.Second); !errors.Is(err, distlock.ErrLocked) {
			return fmt.Errorf("got %v, want ErrLocked", err)
		}
		return nil
	})
	count("TryLock of a held key with the kept lease", 1, func() error {
		if _, err := l.TryLock(ctxFor(t, 5*time.Second), key, 30*time.Second); !errors.Is(err, distlock.ErrLocked) {
			return fmt.Errorf("got %v, want ErrLocked", err)
		}
		return nil
	})
	woke := make(chan error, 1)
	before := c.Load()
	go func() {
		woke <- l.Wait(ctxFor(t, 10*time.Second), key)
	}()
	// Any Locker with the lease may unlock it; other does, so that c counts Wait's
	// requests only.
	require.NoError(t, other.Unlock(ctxFor(t, 5*time.Second), lease))
	if err := <-woke; err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if got := c.Load() - before; got > 2 {
		t.Errorf("Wait took %d round trips, want at most 2 (Watch, Range)", got)
	}
	lease, err := l.TryLock(ctxFor(t, 5*time.Second), key, time.Second)
	require.NoError(t, err)
	// Txn: the lease stays as a spare.
	count("Unlock", 1, func() error { return l.Unlock(ctxFor(t, 5*time.Second), lease) })
}

// leaseOf returns the ID and granted TTL of the etcd lease that holds key.
func leaseOf(t *testing.T, cli *clientv3.Client, l *etcdlock.Locker, key string) (clientv3.LeaseID, int64) {
	t.Helper()
	get, err := cli.Get(ctxFor(t, 5*time.Second), l.EtcdKey(key))
	if err != nil || len(get.Kvs) != 1 {
		t.Fatalf("get %q: %v, %d keys", l.EtcdKey(key), err, len(get.Kvs))
	}
	id := clientv3.LeaseID(get.Kvs[0].Lease)
	ttl, err := cli.TimeToLive(ctxFor(t, 5*time.Second), id)
	require.NoError(t, err)
	return id, ttl.GrantedTTL
}

// TestRenewOtherTTL: Renew with a longer ttl (in whole seconds) moves the key to a
// lease of that ttl and revokes the old lease; Renew with a ttl that is not longer
// keeps the key's lease and refreshes it (Renew never shortens what the server
// holds), while Expires counts the ttl asked for. Key, Token and Fence stay.
func TestRenewOtherTTL(t *testing.T) {
	cli := newClient(t, []string{etcdSrv.Addr()}, nil)
	l := newLocker(t, cli, nil)
	key := "renew-ttl-" + driver.NewToken()
	la, err := l.TryLock(ctxFor(t, 5*time.Second), key, 1500*time.Millisecond)
	require.NoError(t, err)
	first, granted := leaseOf(t, cli, l, key)
	if granted != 2 {
		t.Fatalf("a ttl of 1.5s got a lease of %ds, want 2s", granted)
	}
	for _, c := range []struct {
		ttl   time.Duration
		want  int64 // the TTL of the key's lease after the renewal
		moved bool
	}{{10 * time.Second, 10, true}, {1800 * time.Millisecond, 10, false}, {time.Second, 10, false}, {10 * time.Second, 10, false}, {12 * time.Second, 12, true}} {
		start := time.Now()
		next, err := l.Renew(ctxFor(t, 5*time.Second), la, c.ttl)
		if err != nil {
			t.Fatalf("Renew(%v): %v", c.ttl, err)
		}
		if next.Key != la.Key || next.Token != la.Token || next.Fence != la.Fence {
			t.Fatalf("Renew(%v) changed the lease's identity: %+v -> %+v", c.ttl, la, next)
		}
		returned := time.Now()
		if tolerance := max(returned.Sub(start)/2, time.Millisecond); next.Expires.After(start.Add(c.ttl+tolerance)) || !next.Expires.After(returned) {
			t.Fatalf("Renew(%v): Expires %v from the renewal's start", c.ttl, next.Expires.Sub(start))
		}
		id, granted := leaseOf(t, cli, l, key)
		if granted != c.want {
			t.Fatalf("after Renew(%v) the key's lease has a TTL of %ds, want %d", c.ttl, granted, c.want)
		}
		if moved := id != first; moved != c.moved {
			t.Fatalf("Renew(%v) moved the key to a new lease: %v, want %v", c.ttl, moved, c.moved)
		}
		if c.moved {
			if ttl, err := cli.TimeToLive(ctxFor(t, 5*time.Second), first); err != nil || ttl.TTL != -1 {
				t.Fatalf("the old lease %x after the move: TTL %v, %v; want it revoked", first, ttl, err)
			}
		} else if ttl, err := cli.TimeToLive(ctxFor(t, 5*time.Second), id); err != nil || ttl.TTL < c.want-1 {
			t.Fatalf("the kept lease after Renew(%v): TTL %v, %v; want it refreshed to about %ds", c.ttl, ttl, err, c.want)
		}
		first, la = id, next
	}
	require.NoError(t, l.Unlock(ctxFor(t, 5*time.Second), la))
	if ttl, err := cli.TimeToLive(ctxFor(t, 5*time.Second), first); err != nil || ttl.TTL <= 0 {
		t.Fatalf("the lease after Unlock: TTL %v, %v; want it kept as a spare", ttl, err)
	}
}

// TestPartitionedHolder: the holder's traffic is stalled (a partition); its lease expires on the
// server, another client acquires after the ttl with a larger fence, and once the
// partition heals the holder's Renew gives ErrNotHeld and its Lost channel closes.
func TestPartitionedHolder(t *testing.T) {
	p, err := faultproxy.New(etcdSrv.Addr(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	a := newLocker(t, newClient(t, []string{p.Addr()}, nil), &etcdlock.Options{Owner: "a"})
	b := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), &etcdlock.Options{Owner: "b"})
	key := "partition-" + driver.NewToken()
	const ttl = 2 * time.Second
	la, err := a.TryLock(ctxFor(t, 5*time.Second), key, ttl)
	require.NoError(t, err)
	lost := a.Lost(la)
	if lost == nil {
		t.Fatal("Lost returned nil for a held lease")
	}
	h, err := b.Inspect(ctxFor(t, 5*time.Second), key)
	if err != nil || h.Owner != "a" || h.Fence != la.Fence {
		t.Fatalf("Inspect: %+v, %v", h, err)
	}

	// A stall, not a blackhole: the requests sent during the partition reach the
	// server after it heals, as TCP resends them. A blackhole's lost bytes would
	// leave the server's HPACK table without the headers first sent during it, and
	// the connection unusable for a reason no real network gives.
	p.Stall()
	if _, err := a.Renew(ctxFor(t, 500*time.Millisecond), la, ttl); err == nil || errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("Renew through the partition: %v; want a transport error", err)
	}
	var lb distlock.Lease
	var acquired time.Time
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		lb, err = b.TryLock(ctx, key, 10*time.Second)
		acquired = time.Now()
		return !errors.Is(err, distlock.ErrLocked)
	}, ttl+3*time.Second, 20*time.Millisecond, "b could not acquire after the partitioned holder's ttl")
	require.NoError(t, err, "TryLock by b")
	if acquired.Before(la.Expires) {
		t.Fatalf("b acquired %v before the holder's Expires", la.Expires.Sub(acquired))
	}
	if lb.Fence <= la.Fence {
		t.Fatalf("fence %d after the partition is not above %d", lb.Fence, la.Fence)
	}
	select {
	case <-lost:
		t.Fatal("Lost closed while the holder was partitioned (it cannot have heard)")
	default:
	}

	p.Heal()
	renewErr := eventuallyNotHeld(t, 10*time.Second, func(ctx context.Context) error {
		_, err := a.Renew(ctx, la, ttl)
		return err
	})
	require.ErrorIs(t, renewErr, distlock.ErrNotHeld, "the partitioned holder's Renew after healing")
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("Lost not closed 10s after the partition healed")
	}
	if err := a.Unlock(ctxFor(t, 5*time.Second), la); !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("the stale holder's Unlock: %v; want ErrNotHeld", err)
	}
	require.NoError(t, b.Unlock(ctxFor(t, 5*time.Second), lb))
}

// TestHoldLostOnRevoke: a Held lease whose etcd lease is revoked behind its back (an
// operator, a server that lost it) is reported lost at once through LossNotifier, long
// before its ttl.
func TestHoldLostOnRevoke(t *testing.T) {
	cli := newClient(t, []string{etcdSrv.Addr()}, nil)
	l := newLocker(t, cli, nil)
	key := "hold-" + driver.NewToken()
	lease, err := l.TryLock(ctxFor(t, 5*time.Second), key, 30*time.Second)
	require.NoError(t, err)
	held := distlock.Hold(t.Context(), l, lease, &distlock.HoldOptions{TTL: 30 * time.Second})
	defer held.Release(context.Background())
	id, _ := leaseOf(t, cli, l, key)
	revoked := time.Now()
	if _, err := cli.Revoke(ctxFor(t, 5*time.Second), id); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held.Context().Done():
		if !errors.Is(context.Cause(held.Context()), distlock.ErrNotHeld) {
			t.Fatalf("Held.Context cancelled with %v, want ErrNotHeld", context.Cause(held.Context()))
		}
		t.Logf("loss noticed %v after the revoke", time.Since(revoked))
	case <-time.After(5 * time.Second):
		t.Fatal("Hold did not notice within 5s that the lease was revoked")
	}

	// Lost of a released lease closes, and of one never issued is nil.
	lease, err = l.TryLock(ctxFor(t, 5*time.Second), key, 30*time.Second)
	require.NoError(t, err)
	lost := l.Lost(lease)
	if l.Lost(lease) != lost {
		t.Fatal("two Lost calls for one lease returned different channels")
	}
	require.NoError(t, l.Unlock(ctxFor(t, 5*time.Second), lease))
	select {
	case <-lost:
	case <-time.After(5 * time.Second):
		t.Fatal("Lost not closed 5s after Unlock")
	}
	if ch := l.Lost(distlock.Lease{Key: key, Token: "x", Fence: 1}); ch != nil {
		t.Fatal("Lost of a forged lease is not nil")
	}
}

// TestLeaderKill kills the cluster's leader in the middle of a contention run: no two
// holders overlap, fences increase, and locks are acquired after the election.
func TestLeaderKill(t *testing.T) {
	c := etcdCluster
	ctx := ctxFor(t, 3*time.Minute)
	leader, err := c.WaitLeader(ctx)
	require.NoError(t, err)
	killed := false
	t.Cleanup(func() {
		if killed {
			leader.Restart(t) // rejoins; the next tests use the whole cluster again
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := c.WaitLeader(ctx); err != nil {
				t.Error(err)
			}
		}
	})

	const clients, goroutines, nkeys, afterKill = 6, 2, 2, 30
	const ttl = 2 * time.Second
	var keys [nkeys]string
	for i := range keys {
		keys[i] = "leader-kill-" + driver.NewToken()
	}
	var (
		mu       sync.Mutex
		history  []conformance.Acquisition
		failures []error
		counters [nkeys]atomic.Int64
		total    atomic.Int64
		after    atomic.Int64 // acquisitions that started after the kill
		killedAt atomic.Pointer[time.Time]
		kill     = make(chan struct{})
		enough   = make(chan struct{})
		wg       sync.WaitGroup
	)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	for i := range clients {
		l := newLocker(t, newClient(t, c.Endpoints(), nil), &etcdlock.Options{Owner: fmt.Sprint("client-", i)})
		for g := range goroutines {
			wg.Go(func() {
				for r := 0; runCtx.Err() == nil; r++ {
					k := (i + g + r) % nkeys
					actx, cancel := context.WithTimeout(runCtx, 30*time.Second)
					lease, start, acquired, err := acquire(actx, l, keys[k], ttl)
					cancel()
					first := lease.Expires
					if err != nil {
						if runCtx.Err() == nil {
							mu.Lock()
							failures = append(failures, fmt.Errorf("Lock(%q): %w", keys[k], err))
							mu.Unlock()
						}
						return
					}
					v := counters[k].Load()
					runtime.Gosched()
					counters[k].Store(v + 1)
					if r%2 == 1 {
						if next, err := l.Renew(runCtx, lease, ttl); err == nil {
							lease = next
						}
					}
					end := time.Now()
					if end.After(lease.Expires) {
						end = lease.Expires
					}
					uctx, ucancel := context.WithTimeout(context.WithoutCancel(runCtx), 5*time.Second)
					_ = l.Unlock(uctx, lease) // may fail while the leader is gone: the lease then expires
					ucancel()
					mu.Lock()
					history = append(history, conformance.Acquisition{Key: keys[k], Fence: lease.Fence, Token: lease.Token,
						Start: start, Acquired: acquired, End: end, Expires: first, TTL: ttl})
					mu.Unlock()
					if n := total.Add(1); n == 20 {
						close(kill)
					}
					if at := killedAt.Load(); at != nil && start.After(*at) {
						if after.Add(1) == afterKill {
							close(enough)
						}
					}
				}
			})
		}
	}
	select {
	case <-kill:
	case <-ctx.Done():
		stop()
		wg.Wait()
		t.Fatalf("only %d acquisitions before the kill; failures: %v", total.Load(), failures)
	}
	leader.Kill(t)
	killed = true
	now := time.Now()
	killedAt.Store(&now)
	next, err := c.WaitLeader(ctxFor(t, 30*time.Second))
	if err != nil {
		stop()
		wg.Wait()
		t.Fatal(err)
	}
	t.Logf("killed leader %s after %d acquisitions; %s leads after %v", leader, total.Load(), next, time.Since(now))
	select {
	case <-enough:
	case <-time.After(90 * time.Second):
		t.Errorf("only %d acquisitions in 90s after the leader was killed", after.Load())
	}
	stop()
	wg.Wait()

	for _, err := range failures {
		t.Error(err)
	}
	for _, err := range conformance.CheckHistory(history) {
		t.Error(err)
	}
	for k := range keys {
		var n int64
		for _, a := range history {
			if a.Key == keys[k] {
				n++
			}
		}
		if got := counters[k].Load(); got != n {
			t.Errorf("key %q: an unguarded counter reads %d after %d acquisitions (overlapping holders)", keys[k], got, n)
		}
	}
	t.Logf("%d acquisitions, %d of them started after the kill", len(history), after.Load())

	// A new client of the surviving members locks and unlocks at once.
	l := newLocker(t, newClient(t, c.Endpoints(), nil), nil)
	lease, err := l.TryLock(ctxFor(t, 10*time.Second), "after-election-"+driver.NewToken(), ttl)
	if err != nil {
		t.Fatalf("TryLock after the election: %v", err)
	}
	if err := l.Unlock(ctxFor(t, 10*time.Second), lease); err != nil {
		t.Fatalf("Unlock after the election: %v", err)
	}
}

// acquire retries TryLock until it succeeds or ctx ends: through Wait while the key
// is held, after a short pause on other errors (a leader election). It returns the
// successful attempt's start and return times.
func acquire(ctx context.Context, l *etcdlock.Locker, key string, ttl time.Duration) (lease distlock.Lease, start, returned time.Time, err error) {
	for {
		start = time.Now()
		lease, err = l.TryLock(ctx, key, ttl)
		returned = time.Now()
		if err == nil || ctx.Err() != nil {
			return lease, start, returned, err
		}
		if errors.Is(err, distlock.ErrLocked) {
			wctx, cancel := context.WithTimeout(ctx, time.Second)
			_ = l.Wait(wctx, key)
			cancel()
			continue
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// TestWaitAfterSighting: a Wait that follows a TryLock which saw the key held wakes
// on a release that happened between the two (the store changed since the sighting,
// so Wait reads the key), and on a release after it started (the watch). Neither
// waits for the holder's ttl, which is long.
func TestWaitAfterSighting(t *testing.T) {
	a := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), nil)
	b := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), nil)
	key := "sighting-" + driver.NewToken()
	const ttl = time.Minute

	la, err := a.TryLock(ctxFor(t, 5*time.Second), key, ttl)
	require.NoError(t, err)
	if _, err := b.TryLock(ctxFor(t, 5*time.Second), key, ttl); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock of a held key: %v", err)
	}
	require.NoError(t, a.Unlock(ctxFor(t, 5*time.Second), la))
	start := time.Now()
	if err := b.Wait(ctxFor(t, 10*time.Second), key); err != nil {
		t.Fatalf("Wait after a release that followed the sighting: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Wait after a release that followed the sighting took %v", took)
	}

	la, err = a.TryLock(ctxFor(t, 5*time.Second), key, ttl)
	require.NoError(t, err)
	if _, err := b.TryLock(ctxFor(t, 5*time.Second), key, ttl); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock of a held key: %v", err)
	}
	woke := make(chan error, 1)
	go func() { woke <- b.Wait(ctxFor(t, 10*time.Second), key) }()
	hold := time.NewTimer(100 * time.Millisecond)
	defer hold.Stop()
	select {
	case err := <-woke:
		t.Fatalf("Wait returned %v while the key was held", err)
	case <-hold.C:
	}
	unlocked := time.Now()
	require.NoError(t, a.Unlock(ctxFor(t, 5*time.Second), la))
	if err := <-woke; err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if took := time.Since(unlocked); took > 5*time.Second {
		t.Fatalf("Wait woke %v after the release", took)
	}
}

// TestSpareLease: a TryLock that finds the key held keeps its lease (which holds no
// key), and the next TryLock uses it: the acquired key is on that lease, and the
// Lease's Expires counts from its grant. When the kept lease was revoked from
// outside, TryLock grants another.
func TestSpareLease(t *testing.T) {
	cli := newClient(t, []string{etcdSrv.Addr()}, nil)
	a := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), nil)
	b := newLocker(t, cli, nil)
	const ttl = 30 * time.Second
	// spareOf makes b fail a TryLock of a held key and returns the lease it kept
	// and a time after its grant was sent.
	spareOf := func(key string) (clientv3.LeaseID, time.Time) {
		t.Helper()
		before := leaseIDs(t, cli)
		if _, err := b.TryLock(ctxFor(t, 5*time.Second), key, ttl); !errors.Is(err, distlock.ErrLocked) {
			t.Fatalf("TryLock of a held key: %v", err)
		}
		returned := time.Now() // after the grant's request was sent
		var kept []clientv3.LeaseID
		for id := range leaseIDs(t, cli) {
			if !before[id] {
				kept = append(kept, id)
			}
		}
		if len(kept) != 1 {
			t.Fatalf("a TryLock of a held key left %d new leases, want the 1 it keeps", len(kept))
		}
		return kept[0], returned
	}

	key := "spare-" + driver.NewToken()
	la, err := a.TryLock(ctxFor(t, 5*time.Second), key, ttl)
	require.NoError(t, err)
	kept, grantedBy := spareOf(key)
	require.NoError(t, a.Unlock(ctxFor(t, 5*time.Second), la))
	lb, err := b.TryLock(ctxFor(t, 5*time.Second), key, ttl)
	require.NoError(t, err)
	if id, _ := leaseOf(t, cli, b, key); id != kept {
		t.Fatalf("the key is on lease %x, want the kept lease %x", id, kept)
	}
	if lb.Expires.After(grantedBy.Add(ttl)) {
		t.Fatalf("Expires is %v after the kept lease's grant + ttl", lb.Expires.Sub(grantedBy.Add(ttl)))
	}
	require.NoError(t, b.Unlock(ctxFor(t, 5*time.Second), lb))

	// A new Locker: b keeps lb's lease as a spare now.
	b = newLocker(t, cli, nil)
	key = "spare-revoked-" + driver.NewToken()
	if la, err = a.TryLock(ctxFor(t, 5*time.Second), key, ttl); err != nil {
		t.Fatal(err)
	}
	kept, _ = spareOf(key)
	if _, err := cli.Revoke(ctxFor(t, 5*time.Second), kept); err != nil {
		t.Fatal(err)
	}
	require.NoError(t, a.Unlock(ctxFor(t, 5*time.Second), la))
	lb, err = b.TryLock(ctxFor(t, 5*time.Second), key, ttl)
	if err != nil {
		t.Fatalf("TryLock after its kept lease was revoked: %v", err)
	}
	if id, _ := leaseOf(t, cli, b, key); id == kept {
		t.Fatalf("the key is on the revoked lease %x", id)
	}
	require.NoError(t, b.Unlock(ctxFor(t, 5*time.Second), lb))
}

// TestWaitsShareWatch: concurrent Waits of one Locker on one key share one watch,
// all wake when the key is deleted, and the watch ends once it has had no Wait for
// its idle time.
func TestWaitsShareWatch(t *testing.T) {
	a := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), nil)
	b := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), nil)
	b.SetWatchIdle(100 * time.Millisecond)
	key := "share-" + driver.NewToken()
	la, err := a.TryLock(ctxFor(t, 5*time.Second), key, time.Minute)
	require.NoError(t, err)
	const waits = 5
	woke := make(chan error, waits)
	for range waits {
		go func() { woke <- b.Wait(ctxFor(t, 10*time.Second), key) }()
	}
	require.Eventually(t, func() bool { _, refs := b.Watches(key); return refs == waits }, 5*time.Second, 10*time.Millisecond,
		"the Waits did not all join one watch")
	if keys, _ := b.Watches(key); keys != 1 {
		t.Fatalf("%d Waits on one key hold %d watches, want 1", waits, keys)
	}
	require.NoError(t, a.Unlock(ctxFor(t, 5*time.Second), la))
	for range waits {
		if err := <-woke; err != nil {
			t.Fatalf("Wait: %v", err)
		}
	}
	require.Eventually(t, func() bool { keys, _ := b.Watches(key); return keys == 0 }, 5*time.Second, 10*time.Millisecond,
		"the idle watch did not end")
}

// TestWaitLoopRoundTrips: in a loop of TryLock and Wait on a held key, after the
// first round each TryLock is one request (a Txn on the kept lease) and each Wait
// none (the shared watch, and the TryLock as its check).
func TestWaitLoopRoundTrips(t *testing.T) {
	var c rttCounter
	l := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, &c), nil)
	other := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), nil)
	key := "loop-" + driver.NewToken()
	const ttl = 30 * time.Second
	lo, err := other.TryLock(ctxFor(t, 5*time.Second), key, ttl)
	require.NoError(t, err)
	tryLocked := func() {
		t.Helper()
		if _, err := l.TryLock(ctxFor(t, 5*time.Second), key, ttl); !errors.Is(err, distlock.ErrLocked) {
			t.Fatalf("TryLock of a held key: %v", err)
		}
	}
	tryLocked() // Grant, Txn
	// The first Wait starts the watch (and reads the key: the watch started after
	// the sighting); it is cancelled once the watch has started (the watch stays).
	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() { first <- l.Wait(ctx, key) }()
	require.Eventually(t, func() bool { return l.WatchStarted(key) }, 10*time.Second, 10*time.Millisecond,
		"the first Wait did not start its watch")
	cancel()
	if err := <-first; !errors.Is(err, distlock.ErrLocked) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Wait on a held key: %v", err)
	}
	before := c.Load()
	tryLocked()
	if got := c.Load() - before; got != 1 {
		t.Fatalf("TryLock in the loop took %d round trips, want 1", got)
	}
	before = c.Load()
	woke := make(chan error, 1)
	go func() { woke <- l.Wait(ctxFor(t, 10*time.Second), key) }()
	hold := time.NewTimer(100 * time.Millisecond)
	defer hold.Stop()
	select {
	case err := <-woke:
		t.Fatalf("Wait returned %v while the key was held", err)
	case <-hold.C:
	}
	require.NoError(t, other.Unlock(ctxFor(t, 5*time.Second), lo))
	if err := <-woke; err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if got := c.Load() - before; got != 0 {
		t.Fatalf("Wait in the loop took %d round trips, want 0", got)
	}
	lease, err := l.TryLock(ctxFor(t, 5*time.Second), key, ttl)
	if err != nil {
		t.Fatalf("TryLock after the release: %v", err)
	}
	require.NoError(t, l.Unlock(ctxFor(t, 5*time.Second), lease))
}

// eventuallyNotHeld calls f, each time with a context of 5s, until it returns nil or
// an error wrapping ErrNotHeld, or d passes; it returns f's last error. A nil error
// (the stale holder succeeded) fails the test.
func eventuallyNotHeld(t *testing.T, d time.Duration, f func(ctx context.Context) error) error {
	t.Helper()
	var err error
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		err = f(ctx)
		return err == nil || errors.Is(err, distlock.ErrNotHeld)
	}, d, 20*time.Millisecond, "no ErrNotHeld within %v", d)
	require.Error(t, err, "the stale holder's call succeeded")
	return err
}
