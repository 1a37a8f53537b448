package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Tests of etcdlock under faults inside the 3-member cluster (issue 12): a member
// cut off from its peers, a leader change, a member that loses its data, a killed
// member. Each leaves the cluster whole, with a leader, when it ends.

// leaderIndex returns the index of the cluster's leader in etcdCluster.Members.
func leaderIndex(t *testing.T) int {
	t.Helper()
	leader, err := etcdCluster.WaitLeader(ctxFor(t, time.Minute))
	require.NoError(t, err)
	for i, m := range etcdCluster.Members {
		if m == leader {
			return i
		}
	}
	t.Fatalf("the leader %s is no member", leader)
	return -1
}

// endpointsBut returns the client endpoints of every member but member i.
func endpointsBut(i int) []string {
	var eps []string
	for j, m := range etcdCluster.Members {
		if j != i {
			eps = append(eps, m.Addr())
		}
	}
	return eps
}

// wholeAfter registers a cleanup that restarts stopped members and waits until the
// cluster has a leader again.
func wholeAfter(t *testing.T) {
	t.Cleanup(func() {
		for _, m := range etcdCluster.Members {
			if !m.Running() {
				m.Restart(t)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := etcdCluster.WaitLeader(ctx); err != nil {
			t.Error(err)
		}
	})
}

// TestWaitOnIsolatedMember (issue 12, part 5): a Wait whose client reaches only a
// member that is cut off from its peers returns within the holder's ttl (here
// with an error: it cannot read the key), instead of blocking until its context
// ends.
func TestWaitOnIsolatedMember(t *testing.T) {
	for _, role := range []string{"follower", "leader"} {
		t.Run(role, func(t *testing.T) {
			wholeAfter(t)
			li := leaderIndex(t)
			m := li
			if role == "follower" {
				m = (li + 1) % len(etcdCluster.Members)
			}
			h := newLocker(t, newClient(t, endpointsBut(m), nil), &etcdlock.Options{Owner: "holder"})
			w := newLocker(t, newClient(t, []string{etcdCluster.Members[m].Addr()}, nil), &etcdlock.Options{Owner: "waiter"})
			key := "wait-isolated-" + driver.NewToken()
			const ttl = 3 * time.Second
			lh, err := h.TryLock(ctxFor(t, 5*time.Second), key, ttl)
			require.NoError(t, err)
			heal := etcdCluster.Isolate(t, m)
			start := time.Now()
			err = w.Wait(ctxFor(t, 30*time.Second), key)
			took := time.Since(start)
			t.Logf("Wait on the isolated %s returned after %v: %v", role, took, err)
			if bound := time.Until(lh.Expires) + took + time.Second; took > bound {
				t.Fatalf("Wait on the isolated %s blocked %v; the holder's ttl bounds it to %v", role, took, bound)
			}
			if errors.Is(err, distlock.ErrLocked) {
				t.Fatalf("Wait on the isolated %s ended with its context: %v", role, err)
			}
			heal()
		})
	}
}

// TestIsolatedHolder (issue 12, part 4): a holder whose client reaches only a
// member that is then cut off from its peers (the leader, or a follower) cannot
// renew: every Renew fails, and no other client acquires the key before the
// holder's last Expires, nor while its Held.Context lives. After the heal its
// Renew reports ErrNotHeld; the next holder's fence is larger.
func TestIsolatedHolder(t *testing.T) {
	for _, role := range []string{"follower", "leader"} {
		t.Run(role, func(t *testing.T) {
			wholeAfter(t)
			li := leaderIndex(t)
			m := li
			if role == "follower" {
				m = (li + 1) % len(etcdCluster.Members)
			}
			cCli := newClient(t, []string{etcdCluster.Members[m].Addr()}, nil)
			c := newLocker(t, cCli, &etcdlock.Options{Owner: "c"})
			d := newLocker(t, newClient(t, endpointsBut(m), nil), &etcdlock.Options{Owner: "d"})
			key := "isolated-holder-" + driver.NewToken()
			const ttl = 3 * time.Second
			lc, err := c.TryLock(ctxFor(t, 5*time.Second), key, ttl)
			require.NoError(t, err)
			held := distlock.Hold(t.Context(), c, lc, &distlock.HoldOptions{TTL: ttl})
			defer held.Release(context.Background())

			id, _ := leaseOf(t, cCli, c, key)
			heal := etcdCluster.Isolate(t, m)
			isolated := time.Now()
			// What etcd does with keepalives that reach the isolated member (logged
			// for etcdlock's doc): an isolated leader accepts them until it steps
			// down.
			probe := make(chan string, 1)
			go func() {
				accepted, lastSent := 0, time.Duration(0)
				var kerr error
				for time.Since(isolated) < 5*time.Second {
					kctx, cancel := context.WithTimeout(t.Context(), time.Second)
					sent := time.Since(isolated)
					_, kerr = cCli.KeepAliveOnce(kctx, id)
					cancel()
					if kerr != nil {
						break
					}
					accepted, lastSent = accepted+1, sent
					time.Sleep(20 * time.Millisecond) // a probe's pace, not an ordering
				}
				probe <- fmt.Sprintf("raw KeepAliveOnce on the isolated %s: %d accepted, the last sent %v after Isolate; then %v", role, accepted, lastSent, kerr)
			}()
			// Every Renew after the isolation fails (it is bounded by the lease's
			// Expires, as Hold's are).
			rctx, cancel := context.WithDeadline(t.Context(), held.Lease().Expires)
			_, rerr := c.Renew(rctx, held.Lease(), ttl)
			cancel()
			t.Log(<-probe)
			if rerr == nil {
				t.Fatalf("Renew through the isolated %s succeeded", role)
			}
			t.Logf("Renew through the isolated %s: %v", role, rerr)
			var ld distlock.Lease
			var acquired time.Time
			require.Eventually(t, func() bool {
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				defer cancel()
				ld, err = d.TryLock(ctx, key, ttl)
				acquired = time.Now()
				return err == nil // other errors: the majority may be electing
			}, 30*time.Second, 20*time.Millisecond, "D did not acquire within 30s of the isolation of the holder's %s", role)
			last := held.Lease()
			if acquired.Before(last.Expires) {
				t.Fatalf("D acquired %v before the isolated holder's Expires", last.Expires.Sub(acquired))
			}
			if held.Context().Err() == nil {
				t.Fatal("D acquired while the isolated holder's Held.Context was alive")
			}
			if ld.Fence <= lc.Fence {
				t.Fatalf("D's fence %d is not above the isolated holder's %d", ld.Fence, lc.Fence)
			}
			t.Logf("D acquired %v after the isolation, %v after the holder's Expires", acquired.Sub(isolated), acquired.Sub(last.Expires))

			heal()
			eventuallyNotHeld(t, 30*time.Second, func(ctx context.Context) error {
				_, err := c.Renew(ctx, lc, ttl)
				return err
			})
			require.NoError(t, d.Unlock(ctxFor(t, 10*time.Second), ld))
		})
	}
}

// exclusiveDuring holds a key with Hold through c while fault runs, and checks
// with d, which tries the key all along, that nobody else acquires it while the
// holder's Held.Context lives; after the release d acquires with a larger fence.
func exclusiveDuring(t *testing.T, c, d *etcdlock.Locker, fault func()) {
	t.Helper()
	key := "exclusive-" + driver.NewToken()
	const ttl = 3 * time.Second
	lc, err := c.TryLock(ctxFor(t, 10*time.Second), key, ttl)
	require.NoError(t, err)
	held := distlock.Hold(t.Context(), c, lc, &distlock.HoldOptions{TTL: ttl})
	defer held.Release(context.Background())
	stop := make(chan struct{})
	tried := make(chan int)
	var made, target atomic.Int64 // attempts made; the attempt after which settled closes
	target.Store(math.MaxInt64)
	settled := make(chan struct{})
	go func() {
		n := 0
		defer func() { tried <- n }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			ld, err := d.TryLock(ctxFor(t, 5*time.Second), key, ttl)
			n++
			if made.Add(1) == target.Load() {
				close(settled)
			}
			if err == nil {
				if held.Context().Err() == nil {
					t.Errorf("a second holder (fence %d) while the first one's Held.Context lives", ld.Fence)
				}
				_ = d.Unlock(ctxFor(t, 5*time.Second), ld)
				return
			}
		}
	}()
	fault()
	// And for 10 more attempts, or 10s, after: the cluster may still be settling.
	target.Store(made.Load() + 10)
	select {
	case <-settled:
	case <-time.After(10 * time.Second):
	}
	close(stop)
	n := <-tried
	if err := held.Context().Err(); err != nil {
		t.Fatalf("the holder lost its lease during the fault: %v", context.Cause(held.Context()))
	}
	if err := held.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Release after the fault: %v", err)
	}
	ld, err := d.TryLock(ctxFor(t, 10*time.Second), key, ttl)
	if err != nil {
		t.Fatalf("TryLock after the release: %v", err)
	}
	if ld.Fence <= lc.Fence {
		t.Fatalf("fence %d after the fault is not above %d", ld.Fence, lc.Fence)
	}
	require.NoError(t, d.Unlock(ctxFor(t, 10*time.Second), ld))
	t.Logf("%d attempts of a second client during the fault, none acquired", n)
}

// TestLeaderChangeUnderHolder (issue 12, part 4): leadership moves thrice while a
// key is held; the lease stays held and exclusive, and fences increase.
func TestLeaderChangeUnderHolder(t *testing.T) {
	wholeAfter(t)
	c := newLocker(t, newClient(t, etcdCluster.Endpoints(), nil), &etcdlock.Options{Owner: "c"})
	d := newLocker(t, newClient(t, etcdCluster.Endpoints(), nil), &etcdlock.Options{Owner: "d"})
	exclusiveDuring(t, c, d, func() {
		for range 3 {
			start := time.Now()
			to := etcdCluster.ChangeLeader(t)
			t.Logf("leadership moved to %s in %v", to, time.Since(start))
		}
	})
}

// TestLoseDataUnderHolder (issue 12, part 4): a member (a follower, then the
// leader) loses its data and rejoins empty while a key is held; the lease stays
// held and exclusive, also for a client that reads through the member that lost
// its data, and fences increase.
func TestLoseDataUnderHolder(t *testing.T) {
	for _, role := range []string{"follower", "leader"} {
		t.Run(role, func(t *testing.T) {
			wholeAfter(t)
			li := leaderIndex(t)
			m := li
			if role == "follower" {
				m = (li + 1) % len(etcdCluster.Members)
			}
			c := newLocker(t, newClient(t, endpointsBut(m), nil), &etcdlock.Options{Owner: "c"})
			d := newLocker(t, newClient(t, []string{etcdCluster.Members[m].Addr()}, nil), &etcdlock.Options{Owner: "d"})
			exclusiveDuring(t, c, d, func() {
				start := time.Now()
				etcdCluster.LoseData(t, m)
				t.Logf("the %s lost its data and rejoined in %v", role, time.Since(start))
			})
		})
	}
}

// cliLikeClient is a clientv3.Client configured as cmd/distlock configures it (no
// keepalive dial options), of every member.
func cliLikeClient(t *testing.T) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcdCluster.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestUnlockWithMemberDown (issue 12, part 6): with one member down, killed
// (its connections reset) or paused (silent, as a machine that lost power), a
// holder's Unlock through a client of all three members moves on to a live member
// and releases the key promptly, instead of failing, or waiting on the dead member
// until its context ends, and leaving the key held. Three keys are unlocked one
// after the other, so that the client's round robin sends one of them to each
// member.
func TestUnlockWithMemberDown(t *testing.T) {
	for _, c := range []struct {
		name   string
		leader bool
		down   func(t *testing.T, m *testenv.Server)
	}{
		{"kill-follower", false, func(t *testing.T, m *testenv.Server) { m.Kill(t) }},
		{"kill-leader", true, func(t *testing.T, m *testenv.Server) { m.Kill(t) }},
		{"pause-follower", false, func(t *testing.T, m *testenv.Server) { m.Pause(t) }},
		{"pause-leader", true, func(t *testing.T, m *testenv.Server) { m.Pause(t) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			wholeAfter(t)
			l := newLocker(t, cliLikeClient(t), nil)
			other := newLocker(t, newClient(t, etcdCluster.Endpoints(), nil), nil)
			var leases []distlock.Lease
			for range 3 {
				lease, err := l.TryLock(ctxFor(t, 10*time.Second), "unlock-down-"+driver.NewToken(), 30*time.Second)
				require.NoError(t, err)
				leases = append(leases, lease)
			}
			m := leaderIndex(t)
			if !c.leader {
				m = (m + 1) % len(etcdCluster.Members)
			}
			c.down(t, etcdCluster.Members[m])
			var slowest time.Duration
			for _, lease := range leases {
				start := time.Now()
				err := l.Unlock(ctxFor(t, 5*time.Second), lease) // cmd/distlock's release timeout
				took := time.Since(start)
				slowest = max(slowest, took)
				if err != nil {
					t.Errorf("Unlock with the member down: %v (after %v)", err, took)
					continue
				}
				lo, err := other.TryLock(ctxFor(t, 10*time.Second), lease.Key, 10*time.Second)
				if err != nil {
					t.Errorf("the key after its Unlock: %v", err)
					continue
				}
				_ = other.Unlock(ctxFor(t, 5*time.Second), lo)
			}
			t.Logf("%s: the slowest of 3 Unlocks took %v", c.name, slowest)
			// At most two attempts time out: one on a follower that forwarded the
			// request to a leader that died, one on the member that is down,
			// which the client (without keepalive) still counts as connected.
			if bound := 2*etcdlock.DefaultRequestTimeout + time.Second; slowest > bound {
				t.Errorf("%s: an Unlock took %v, more than %v", c.name, slowest, bound)
			}
		})
	}
}
