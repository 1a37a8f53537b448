package redlock_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/redlock"
)

// TestKillTwoNodes: with two of five nodes dead, locks keep working (TryLock, Renew,
// Unlock, Wait) and a contention run shows no overlap and increasing fences.
func TestKillTwoNodes(t *testing.T) {
	down(t, 3, 4)
	var lockers []*redlock.Locker
	for range 4 {
		lockers = append(lockers, newLocker(t, &redlock.Options{NodeTimeout: time.Second}))
	}
	key := "kill-two-" + driver.NewToken()[:8]
	lease, err := lockers[0].TryLock(t.Context(), key, 10*time.Second)
	if err != nil {
		t.Fatalf("TryLock with 3 of 5 nodes up: %v", err)
	}
	if _, err := lockers[1].TryLock(t.Context(), key, 10*time.Second); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock of a held key with 3 of 5 nodes up: got %v, want ErrLocked", err)
	}
	if lease, err = lockers[0].Renew(t.Context(), lease, 10*time.Second); err != nil {
		t.Fatalf("Renew with 3 of 5 nodes up: %v", err)
	}
	if err := lockers[0].Unlock(t.Context(), lease); err != nil {
		t.Fatalf("Unlock with 3 of 5 nodes up: %v", err)
	}
	workload{
		lockers:    lockers,
		keys:       []string{key, key + "-b"},
		goroutines: 3,
		rounds:     4,
		ttl:        4 * time.Second,
	}.run(t)
}

// TestKillThreeNodes: with three of five nodes dead, TryLock fails within the
// per-node timeout with an error that is not ErrLocked and names the dead nodes, and
// once the nodes are back nothing is left locked.
func TestKillThreeNodes(t *testing.T) {
	l := newLocker(t, &redlock.Options{NodeTimeout: 100 * time.Millisecond})
	key := "kill-three-" + driver.NewToken()[:8]
	ttl := 10 * time.Second
	nt := l.NodeTimeout(ttl)
	if nt != 100*time.Millisecond {
		t.Fatalf("NodeTimeout(%v) = %v, want 100ms", ttl, nt)
	}
	// Warm the connections, so that the measurement is of the attempt.
	warm, err := l.TryLock(t.Context(), key+"-warm", ttl)
	if err != nil {
		t.Fatalf("TryLock with all nodes up: %v", err)
	}
	if err := l.Unlock(t.Context(), warm); err != nil {
		t.Fatalf("Unlock: %v", err)
	}

	down(t, 0, 1, 2)
	for range 3 {
		start := time.Now()
		lease, err := l.TryLock(t.Context(), key, ttl)
		took := time.Since(start)
		if err == nil {
			t.Fatalf("TryLock with 2 of 5 nodes up succeeded (fence %d)", lease.Fence)
		}
		if errors.Is(err, distlock.ErrLocked) {
			t.Fatalf("TryLock with 3 of 5 nodes dead returned ErrLocked: %v", err)
		}
		for _, i := range []int{0, 1, 2} {
			if !strings.Contains(err.Error(), "node "+strconv.Itoa(i)+" ("+nodes[i].Addr()+")") {
				t.Errorf("the error does not name dead node %d (%s): %v", i, nodes[i].Addr(), err)
			}
		}
		// The per-node timeout plus scheduling slack for -race on a busy machine.
		if limit := nt + 150*time.Millisecond; took > limit {
			t.Errorf("TryLock with 3 of 5 nodes dead took %v; the per-node timeout is %v", took, nt)
		}
		t.Logf("TryLock with 3 of 5 nodes dead failed after %v: %v", took, err)
	}

	for _, i := range []int{0, 1, 2} {
		nodes[i].Restart(t)
	}
	name := lockName(key)
	ok := assert.Eventually(t, func() bool {
		for i := range nodes {
			if held, err := rawExists(t.Context(), i, name); err != nil || held {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	if !ok {
		for i := range nodes {
			held, err := rawExists(t.Context(), i, name)
			t.Logf("node %d: lock key present %v (%v)", i, held, err)
		}
		t.Fatalf("a lock key is left on some node 10s after the nodes returned")
	}
	other := newLocker(t, nil)
	lease, err := other.TryLock(t.Context(), key, ttl)
	if err != nil {
		t.Fatalf("TryLock once the nodes returned: %v", err)
	}
	if err := other.Unlock(t.Context(), lease); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// TestSlowNode: a node slowed far beyond the per-node timeout does not delay
// TryLock, Renew or Unlock past that timeout; the lock the slow node grants late
// joins the lease and Unlock (which reaches the slow node after the acquire, the
// proxy delays in order) removes it.
func TestSlowNode(t *testing.T) {
	l, pc := proxied(t, &redlock.Options{NodeTimeout: 100 * time.Millisecond})
	key := "slow-" + driver.NewToken()[:8]
	ttl := 10 * time.Second
	nt := l.NodeTimeout(ttl)
	warm, err := l.TryLock(t.Context(), key, ttl)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	if err := l.Unlock(t.Context(), warm); err != nil {
		t.Fatalf("Unlock: %v", err)
	}

	pc.proxies[0].Delay(5 * nt)
	defer pc.proxies[0].Heal()
	limit := nt + 150*time.Millisecond // scheduling slack for -race on a busy machine
	timed := func(what string, f func() error) {
		t.Helper()
		start := time.Now()
		err := f()
		took := time.Since(start)
		if err != nil {
			t.Fatalf("%s with node 0 slowed by %v: %v", what, 5*nt, err)
		}
		if took > limit {
			t.Fatalf("%s with node 0 slowed by %v took %v; the per-node timeout is %v", what, 5*nt, took, nt)
		}
		t.Logf("%s with node 0 slowed by %v took %v", what, 5*nt, took)
	}
	var lease distlock.Lease
	timed("TryLock", func() (err error) {
		lease, err = l.TryLock(t.Context(), key, ttl)
		if err == nil && lease.Fence <= warm.Fence {
			t.Errorf("Fence %d is not above the previous %d", lease.Fence, warm.Fence)
		}
		return err
	})
	timed("Renew", func() (err error) {
		lease, err = l.Renew(t.Context(), lease, ttl)
		return err
	})
	timed("Unlock", func() error { return l.Unlock(t.Context(), lease) })
	pc.proxies[0].Heal()

	name := lockName(key)
	require.Eventually(t, func() bool {
		held, err := rawExists(t.Context(), 0, name)
		return err == nil && !held
	}, 10*time.Second, 10*time.Millisecond, "the slow node still holds the lock after Unlock")
}

// TestFenceAcrossMajorities: each acquisition runs on a different majority (a
// different minority is dead each time, and the minority that was dead before
// returns with counters that missed the acquisitions since), and fences still
// increase, although a counter on any single node would repeat.
func TestFenceAcrossMajorities(t *testing.T) {
	l := newLocker(t, &redlock.Options{NodeTimeout: time.Second})
	key := "majorities-" + driver.NewToken()[:8]
	_, fenceName, _ := redlock.Names(redlock.DefaultPrefix, key)
	ttl := 10 * time.Second
	counter := func(i int) uint64 { // may run off the test's goroutine
		v, err := testenv.RedisCommand(t.Context(), nodes[i].Addr(), "GET", fenceName)
		if err != nil {
			t.Errorf("GET fence counter on node %d: %v", i, err)
			return 0
		}
		s, _ := v.(string)
		n, _ := strconv.ParseUint(s, 10, 64)
		return n
	}
	downSets := [][]int{nil, {3, 4}, {0, 1}, {2, 3}, {4, 0}, {1, 2}, {3, 4}}
	var last uint64
	var prevDown []int
	hazard := false
	for step, dead := range downSets {
		// The nodes that were down come back with their data, and counters that
		// missed the acquisitions since. (Nodes that come back empty: see
		// TestFenceAfterEmptyRestart.)
		for _, i := range prevDown {
			nodes[i].Restart(t)
		}
		down(t, dead...)
		var up []int
		for i := range nodes {
			if !slices.Contains(dead, i) {
				up = append(up, i)
			}
		}
		// A counter on any one node of this majority would give its value + 1.
		for _, i := range up {
			if counter(i)+1 <= last {
				hazard = true
			}
		}
		var (
			lease distlock.Lease
			err   error
		)
		// Retried while the nodes reconnect.
		require.Eventually(t, func() bool {
			lease, err = l.TryLock(t.Context(), key, ttl)
			return err == nil
		}, 15*time.Second, 10*time.Millisecond, "step %d: TryLock on nodes %v never succeeded", step, up)
		if lease.Fence <= last {
			t.Fatalf("step %d: Fence %d on majority %v is not above the previous fence %d", step, lease.Fence, up, last)
		}
		for _, i := range up {
			if c := counter(i); c < lease.Fence {
				// The raise of nodes beyond the quorum runs in the background.
				require.Eventually(t, func() bool { return counter(i) >= lease.Fence }, 5*time.Second, 10*time.Millisecond,
					"step %d: node %d's counter %d stays below the fence %d", step, i, c, lease.Fence)
			}
		}
		t.Logf("step %d: majority %v, fence %d", step, up, lease.Fence)
		last = lease.Fence
		if err := l.Unlock(t.Context(), lease); err != nil {
			t.Fatalf("step %d: Unlock: %v", step, err)
		}
		prevDown = dead
	}
	if !hazard {
		t.Fatalf("no step had a node whose own counter would have repeated a fence: the test did not force different majorities")
	}
}

// TestEmptyRestartKeepsLease: a node that crashes and comes back empty at once does
// not count until MaxTTL has passed: a held lease keeps its quorum on the other
// nodes, and fences keep increasing.
func TestEmptyRestartKeepsLease(t *testing.T) {
	opts := &redlock.Options{NodeTimeout: time.Second, MaxTTL: time.Second}
	a := newLocker(t, opts)
	b := newLocker(t, opts)
	key := "empty-restart-" + driver.NewToken()[:8]
	ttl := time.Second
	la, err := a.TryLock(t.Context(), key, ttl)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	// Keep a's lease alive while node 0 is away.
	stop := make(chan struct{})
	renewed := make(chan distlock.Lease, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		lease := la
		defer func() { renewed <- lease }()
		tick := time.NewTicker(ttl / 4)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			next, err := a.Renew(t.Context(), lease, ttl)
			if err != nil {
				t.Errorf("Renew while node 0 is away: %v", err)
				return
			}
			lease = next
		}
	})
	restartEmpty(t, 0)
	if _, err := b.TryLock(t.Context(), key, ttl); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock while a renewed lease holds 4 of 5 nodes and node 0 came back empty: got %v, want ErrLocked", err)
	}
	close(stop)
	wg.Wait()
	la = <-renewed
	if err := a.Unlock(t.Context(), la); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	lb, err := b.TryLock(t.Context(), key, ttl)
	if err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	if lb.Fence <= la.Fence {
		t.Fatalf("Fence %d after node 0 came back empty is not above %d", lb.Fence, la.Fence)
	}
	if err := b.Unlock(t.Context(), lb); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	counting(t, b, 10*time.Second)
}

// TestEmptyRestartsUnderContention: while clients contend for two keys, nodes 0, 1
// and 2 in turn crash and come back empty, each once the one before counts again; no
// two leases overlap and fences increase.
func TestEmptyRestartsUnderContention(t *testing.T) {
	ttl := 500 * time.Millisecond
	var lockers []*redlock.Locker
	for range 3 {
		lockers = append(lockers, newLocker(t, &redlock.Options{NodeTimeout: time.Second, MaxTTL: 2 * ttl}))
	}
	key := "chaos-" + driver.NewToken()[:8]
	t.Cleanup(func() {
		for _, s := range nodes {
			if !s.Running() {
				s.Restart(t)
			}
		}
	})
	finished := make(chan struct{})
	var history []conformance.Acquisition
	var wg sync.WaitGroup
	wg.Go(func() {
		// run reports with t.Errorf only, which is safe off the test's goroutine.
		history = workload{
			lockers:    lockers,
			keys:       []string{key, key + "-b"},
			goroutines: 2,
			ttl:        ttl,
			tolerate:   true,
			more: func() bool {
				select {
				case <-finished:
					return false
				default:
					return true
				}
			},
		}.run(t)
	})
	// The restarts run on the test's goroutine: they may fail the test at once.
	func() {
		defer close(finished)
		for i := range 3 {
			nodes[i].Kill(t)
			time.Sleep(ttl + 100*time.Millisecond) // down for a while, then back empty
			restartEmpty(t, i)
			// Kept out for MaxTTL, then given an era, while the workload runs on.
			// A node that lost its data counts as lost until then: restarting the
			// next one sooner would lose a majority's state.
			counting(t, lockers[0], 10*time.Second)
		}
	}()
	wg.Wait()
	if len(history) < 10 {
		t.Fatalf("only %d acquisitions during the restarts", len(history))
	}
}

// TestErrLockedOnlyForContention: TryLock returns ErrLocked when other owners' locks
// on the answering nodes keep it from a quorum, and another error when too few nodes
// answer, whatever some of them hold.
func TestErrLockedOnlyForContention(t *testing.T) {
	l := newLocker(t, &redlock.Options{NodeTimeout: time.Second})
	ctx := t.Context()
	plant := func(key string, idx ...int) {
		t.Helper()
		for _, i := range idx {
			if _, err := testenv.RedisCommand(ctx, nodes[i].Addr(), "SET", lockName(key), "someone-else|1|planted", "PX", "30000"); err != nil {
				t.Fatalf("plant a foreign lock on node %d: %v", i, err)
			}
		}
	}
	try := func(key string) (distlock.Lease, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return l.TryLock(ctx, key, 10*time.Second)
	}
	base := "contention-" + driver.NewToken()[:8]

	// A minority of foreign locks: the free majority is enough.
	k := base + "-minority"
	plant(k, 0, 1)
	lease, err := try(k)
	if err != nil {
		t.Fatalf("TryLock with foreign locks on 2 of 5 nodes: %v", err)
	}
	if err := l.Unlock(ctx, lease); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	// A majority of foreign locks: ErrLocked, naming the owner.
	k = base + "-majority"
	plant(k, 0, 1, 2)
	if _, err := try(k); !errors.Is(err, distlock.ErrLocked) || !strings.Contains(err.Error(), "planted") {
		t.Fatalf("TryLock with foreign locks on 3 of 5 nodes: got %v, want ErrLocked naming the owner \"planted\"", err)
	}

	down(t, 4)
	// 4 answer, 2 of them held by another owner: contention, not failure.
	k = base + "-split"
	plant(k, 0, 1)
	if _, err := try(k); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock with foreign locks on 2 nodes, 1 node dead: got %v, want ErrLocked", err)
	}
	for _, i := range []int{2, 3} {
		if held, err := rawExists(ctx, i, lockName(k)); err != nil || held {
			t.Fatalf("node %d keeps the failed attempt's lock (%v, %v)", i, held, err)
		}
	}

	down(t, 2, 3)
	// Only 2 answer, one of them held: too few nodes, not contention.
	k = base + "-unreachable"
	plant(k, 0)
	if _, err := try(k); err == nil || errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock with 2 of 5 nodes up, one of them held: got %v, want an error that is not ErrLocked", err)
	}
}

// TestInspectQuorumView: Inspect reports the holder of a quorum even with nodes
// dead, ErrNotHeld when no one holds a quorum, and another error when too few nodes
// answer.
func TestInspectQuorumView(t *testing.T) {
	a := newLocker(t, &redlock.Options{NodeTimeout: time.Second, Owner: "owner-a"})
	b := newLocker(t, &redlock.Options{NodeTimeout: time.Second})
	key := "inspect-" + driver.NewToken()[:8]
	ctx := t.Context()
	la, err := a.TryLock(ctx, key, 30*time.Second)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	down(t, 0, 1)
	h, err := b.Inspect(ctx, key)
	if err != nil {
		t.Fatalf("Inspect with 3 of 5 nodes up: %v", err)
	}
	if h.Fence != la.Fence || h.Owner != "owner-a" || h.Key != key {
		t.Fatalf("Inspect = %+v, want fence %d owner %q", h, la.Fence, "owner-a")
	}
	if left := time.Until(h.Expires); left <= 0 || left > 30*time.Second {
		t.Fatalf("Inspect reports Expires %v from now for a 30s lease", left)
	}
	if _, err := b.Inspect(ctx, key+"-free"); !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("Inspect of a free key: got %v, want ErrNotHeld", err)
	}
	down(t, 2)
	if _, err := b.Inspect(ctx, key); err == nil || errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("Inspect with 2 of 5 nodes up: got %v, want an error that is not ErrNotHeld", err)
	}
}

// TestWaitSharesConnection: the Waits of one Locker share one subscription per node,
// all wake on one Unlock, and Close ends the subscriptions (a later Wait returns
// ErrClosed).
func TestWaitSharesConnection(t *testing.T) {
	holder := newLocker(t, nil)
	l := newLocker(t, nil)
	key := "shared-wait-" + driver.NewToken()[:8]
	_, _, channel := redlock.Names(redlock.DefaultPrefix, key)
	numsub := func() int64 { // may run off the test's goroutine
		v, err := testenv.RedisCommand(t.Context(), nodes[0].Addr(), "PUBSUB", "NUMSUB", channel)
		if err != nil {
			t.Errorf("PUBSUB NUMSUB: %v", err)
			return -1
		}
		a, _ := v.([]any)
		if len(a) != 2 {
			t.Errorf("PUBSUB NUMSUB = %v", v)
			return -1
		}
		n, _ := a[1].(int64)
		return n
	}
	lease, err := holder.TryLock(t.Context(), key, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 3
	woke := make(chan error, waiters)
	for range waiters {
		go func() { woke <- l.Wait(t.Context(), key) }()
	}
	require.Eventually(t, func() bool { return numsub() == 1 }, 5*time.Second, 10*time.Millisecond,
		"%d Waits of one Locker: node 0 must have 1 subscriber on the channel", waiters)
	if err := holder.Unlock(t.Context(), lease); err != nil {
		t.Fatal(err)
	}
	for range waiters {
		select {
		case err := <-woke:
			if err != nil {
				t.Fatalf("Wait: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("a Wait did not wake within 5s of Unlock")
		}
	}
	require.NoError(t, l.Close())
	require.Eventually(t, func() bool { return numsub() == 0 }, 5*time.Second, 10*time.Millisecond,
		"node 0 still has subscribers after Close")
	require.ErrorIs(t, l.Wait(t.Context(), key), distlock.ErrClosed, "Wait after Close")
}

// TestLateGrant: a node that grants a lease's lock after TryLock stopped waiting for
// it joins the lease (its counter is raised to the lease's fence, and Unlock reaches
// it); a node that grants it only after the lease was unlocked releases it at once
// instead of keeping it until its ttl.
func TestLateGrant(t *testing.T) {
	l := newLocker(t, &redlock.Options{NodeTimeout: time.Second})
	key := "late-grant-" + driver.NewToken()[:8]
	name := lockName(key)
	_, fenceName, _ := redlock.Names(redlock.DefaultPrefix, key)
	ttl := 30 * time.Second
	counter := func() uint64 {
		v, _ := testenv.RedisCommand(t.Context(), nodes[0].Addr(), "GET", fenceName)
		s, _ := v.(string)
		f, _ := strconv.ParseUint(s, 10, 64)
		return f
	}
	held := func() bool {
		held, err := rawExists(t.Context(), 0, name)
		return err == nil && held
	}

	// Joins the lease.
	release := l.HoldAcquire(0)
	t.Cleanup(release)
	lease, err := l.TryLock(t.Context(), key, ttl)
	if err != nil {
		t.Fatalf("TryLock with node 0's acquire held back: %v", err)
	}
	if held() {
		t.Fatalf("node 0 holds the lock before its acquire was sent")
	}
	release()
	require.Eventually(t, func() bool { return held() && counter() >= lease.Fence }, 5*time.Second, 10*time.Millisecond,
		"node 0's late grant did not join the lease (fence %d)", lease.Fence)
	if err := l.Unlock(t.Context(), lease); err != nil {
		t.Fatal(err)
	}
	if held() {
		t.Fatalf("node 0 keeps the lock after Unlock")
	}

	// Granted after Unlock: released at once.
	release = l.HoldAcquire(0)
	t.Cleanup(release)
	lease, err = l.TryLock(t.Context(), key, ttl)
	if err != nil {
		t.Fatalf("TryLock with node 0's acquire held back: %v", err)
	}
	if err := l.Unlock(t.Context(), lease); err != nil {
		t.Fatal(err)
	}
	before := counter()
	release()
	require.Eventually(t, func() bool { return counter() > before }, 5*time.Second, 10*time.Millisecond,
		"node 0 never ran the held-back acquire")
	require.Eventually(t, func() bool { return !held() }, 5*time.Second, 10*time.Millisecond,
		"node 0 keeps a lock it granted after Unlock (until its ttl of %v)", ttl)
}
