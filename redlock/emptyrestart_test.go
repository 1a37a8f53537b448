package redlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/redlock"
)

// emptyRestartOpts are the options of the tests of nodes that come back empty: a
// short MaxTTL, so that such a node counts again soon.
func emptyRestartOpts() *redlock.Options {
	return &redlock.Options{NodeTimeout: time.Second, MaxTTL: 3 * time.Second}
}

// backWithoutLateGrants restarts the dead nodes idx with their data, once l's last
// TryLock (of ttl) has stopped retrying its calls to them (its per-node timeout
// ended them): so none of them grants that attempt a lock, or counts its fence,
// late.
func backWithoutLateGrants(t *testing.T, l *redlock.Locker, ttl time.Duration, idx ...int) {
	t.Helper()
	time.Sleep(l.NodeTimeout(ttl) + 100*time.Millisecond)
	for _, i := range idx {
		nodes[i].Restart(t)
	}
}

// TestMinorityRestartedEmpty (issue 12, part 5): C holds a key on exactly a quorum,
// nodes 0, 1 and 2 (nodes 3 and 4 were down while it acquired); node 2 comes back
// empty. D must not acquire on nodes 2, 3 and 4 while C's lease lives: node 2 does
// not count until MaxTTL has passed. Once C releases, D acquires with a higher fence.
func TestMinorityRestartedEmpty(t *testing.T) {
	c := newLocker(t, emptyRestartOpts())
	d := newLocker(t, emptyRestartOpts())
	key := "minority-empty-" + driver.NewToken()[:8]
	const ttl = 3 * time.Second
	down(t, 3, 4)
	lc, err := c.TryLock(t.Context(), key, ttl)
	if err != nil {
		t.Fatalf("TryLock on nodes 0, 1, 2: %v", err)
	}
	backWithoutLateGrants(t, c, ttl, 3, 4)
	restartEmpty(t, 2)
	ld, err := d.TryLock(t.Context(), key, ttl)
	if err == nil {
		t.Fatalf("D acquired (fence %d) while C's lease (fence %d) has %v left: node 2 came back empty and counted at once", ld.Fence, lc.Fence, lc.Remaining())
	}
	if lc.Remaining() <= 0 {
		t.Fatalf("the test outlasted C's lease: D's attempt proves nothing")
	}
	if !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("D's TryLock while C holds nodes 0 and 1: got %v, want ErrLocked", err)
	}
	t.Logf("D while C holds: %v", err)
	// C's lease lost node 2's lock: its Unlock reaches only nodes 0 and 1.
	if err := c.Unlock(t.Context(), lc); err != nil && !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("C's Unlock: %v", err)
	}
	ld, err = d.TryLock(t.Context(), key, ttl)
	if err != nil {
		t.Fatalf("D's TryLock after C released: %v", err)
	}
	if ld.Fence <= lc.Fence {
		t.Fatalf("D's fence %d is not above C's %d", ld.Fence, lc.Fence)
	}
	if err := d.Unlock(t.Context(), ld); err != nil {
		t.Fatal(err)
	}
	counting(t, d, 15*time.Second)
}

// TestFenceAfterEmptyRestart (issue 12, part 5): C's fence is recorded on nodes 0, 1
// and 2 only (3 and 4 were down). Node 2 comes back empty; once it counts again,
// nodes 0 and 1 go down, and D acquires on nodes 2, 3 and 4, none of which remembers
// C's fence. D's fence must still be above C's: node 2's counters start in a new era.
func TestFenceAfterEmptyRestart(t *testing.T) {
	l := newLocker(t, emptyRestartOpts())
	key := "fence-empty-" + driver.NewToken()[:8]
	const ttl = 3 * time.Second
	down(t, 3, 4)
	lc, err := l.TryLock(t.Context(), key, ttl)
	if err != nil {
		t.Fatalf("TryLock on nodes 0, 1, 2: %v", err)
	}
	if err := l.Unlock(t.Context(), lc); err != nil {
		t.Fatal(err)
	}
	backWithoutLateGrants(t, l, ttl, 3, 4)
	restartEmpty(t, 2)
	counting(t, l, 15*time.Second)
	down(t, 0, 1)
	var ld distlock.Lease
	require.Eventually(t, func() bool {
		ld, err = l.TryLock(t.Context(), key, ttl)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "TryLock on nodes 2, 3, 4")
	if ld.Fence <= lc.Fence {
		t.Fatalf("fence %d on nodes 2, 3, 4 is not above the fence %d issued on nodes 0, 1, 2 before node 2 lost its data", ld.Fence, lc.Fence)
	}
	t.Logf("fence %d before node 2 lost its data, %d after", lc.Fence, ld.Fence)
	if err := l.Unlock(t.Context(), ld); err != nil {
		t.Fatal(err)
	}
}

// TestMaxTTL: a ttl above Options.MaxTTL is invalid, for TryLock and Renew.
func TestMaxTTL(t *testing.T) {
	l := newLocker(t, &redlock.Options{MaxTTL: 10 * time.Second})
	key := "max-ttl-" + driver.NewToken()[:8]
	if _, err := l.TryLock(t.Context(), key, 11*time.Second); !errors.Is(err, distlock.ErrInvalid) {
		t.Fatalf("TryLock with ttl above MaxTTL: got %v, want ErrInvalid", err)
	}
	lease, err := l.TryLock(t.Context(), key, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Renew(t.Context(), lease, 11*time.Second); !errors.Is(err, distlock.ErrInvalid) {
		t.Fatalf("Renew with ttl above MaxTTL: got %v, want ErrInvalid", err)
	}
	if err := l.Unlock(t.Context(), lease); err != nil {
		t.Fatal(err)
	}
}

// TestNewRejectsClusterNode: a RedLock node must be one standalone server.
func TestNewRejectsClusterNode(t *testing.T) {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].Addr()}})
	t.Cleanup(func() { _ = cc.Close() })
	cs := clients(t, nodeAddrs()[1:])
	if _, err := redlock.New(append(cs, cc), nil); !errors.Is(err, distlock.ErrInvalid) {
		t.Fatalf("New with a ClusterClient as a node: got %v, want ErrInvalid", err)
	}
}
