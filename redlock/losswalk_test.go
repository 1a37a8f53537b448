package redlock_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/redlock"
)

// walkTTL is MaxTTL and the ttl of the walks over losses: a node that comes back
// empty is kept out for a little over it (1.112s).
const walkTTL = time.Second

// walkSpacing is the time between two losses of a walk: more than the quarantine,
// so that no two losses are within MaxTTL of each other.
const walkSpacing = 1800 * time.Millisecond

// eraBound is how long after the loss of a node, first reached by an attempt right
// after it, the node may take to count again by itself (no other traffic): its
// quarantine (1.1 * MaxTTL plus the drift allowance) plus the adoption's bound.
const eraBound = walkTTL + walkTTL/10 + 12*time.Millisecond + 600*time.Millisecond

// healDeployment, in t's cleanup, deletes every node's marker and quarantine and
// brings the five nodes in afresh (a test may leave them without eras on purpose),
// so that the next test starts with every node counting.
func healDeployment(t *testing.T) {
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		for _, s := range nodes {
			if !s.Running() {
				s.Restart(t)
			}
			_, err := testenv.RedisCommand(ctx, s.Addr(), "DEL", redlock.DefaultPrefix+":node", redlock.DefaultPrefix+":quarantine")
			require.NoError(t, err)
		}
		counting(t, newLocker(t, nil), 15*time.Second)
	})
}

// markerOf returns node i's marker ("<epoch>|<era>"; "" when it has none).
func markerOf(t *testing.T, i int) string {
	t.Helper()
	v, err := testenv.RedisCommand(t.Context(), nodes[i].Addr(), "GET", redlock.DefaultPrefix+":node")
	require.NoError(t, err)
	s, _ := v.(string)
	return s
}

// hasEra reports whether node i has a marker with an era (it counts, or will once
// its quarantine ends: the era is set only after it).
func hasEra(t *testing.T, i int) bool {
	m := markerOf(t, i)
	j := strings.IndexByte(m, '|')
	return j >= 0 && j < len(m)-1
}

// tryFor retries TryLock of key until it succeeds or d has passed.
func tryFor(t *testing.T, l *redlock.Locker, key string, d time.Duration) (distlock.Lease, error) {
	deadline := time.Now().Add(d)
	for {
		lease, err := l.TryLock(t.Context(), key, walkTTL)
		if err == nil || time.Now().After(deadline) {
			return lease, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// walkLosses restarts the groups of nodes empty one after another, walkSpacing
// apart (issue 28, item 5): after each loss one acquisition of a key follows, then
// nothing else runs (unless traffic is set: then another key is taken and released
// all along). The documented assumption holds throughout (fewer than a quorum lose
// their data within MaxTTL of each other), so every acquisition must succeed, its
// fence must be above every earlier one, and the nodes of each group must count
// again by themselves within eraBound.
func walkLosses(t *testing.T, groups [][]int, traffic bool) {
	healDeployment(t)
	l := newLocker(t, &redlock.Options{MaxTTL: walkTTL})
	counting(t, l, 15*time.Second)
	key := "walk-" + driver.NewToken()[:8]
	first, err := l.TryLock(t.Context(), key, walkTTL)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(t.Context(), first))
	last := first.Fence
	if traffic {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			other := "walk-traffic-" + driver.NewToken()[:8]
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				if lease, err := l.TryLock(t.Context(), other, walkTTL); err == nil {
					_ = l.Unlock(t.Context(), lease)
				}
			}
		})
		defer wg.Wait()
		defer close(stop)
	}
	for round, g := range groups {
		for _, i := range g {
			restartEmpty(t, i)
		}
		lost := time.Now()
		lease, err := tryFor(t, l, key, 2*time.Second)
		switch {
		case err != nil:
			t.Errorf("round %d (nodes %v came back empty): no acquisition for 2s: %v", round, g, err)
		case lease.Fence <= last:
			t.Errorf("round %d (nodes %v came back empty): fence %d after %d", round, g, lease.Fence, last)
		default:
			t.Logf("round %d (nodes %v came back empty): fence %d (era %d)", round, g, lease.Fence, lease.Fence>>40)
		}
		if err == nil {
			last = max(last, lease.Fence)
			require.NoError(t, l.Unlock(t.Context(), lease))
		}
		// Nothing else runs (but the traffic): the nodes of g must get their era.
		for _, i := range g {
			for !hasEra(t, i) && time.Since(lost) < eraBound {
				time.Sleep(10 * time.Millisecond)
			}
			if !hasEra(t, i) {
				t.Errorf("round %d: node %d has no era %v after it came back empty (marker %q)", round, i, time.Since(lost).Round(time.Millisecond), markerOf(t, i))
			}
		}
		time.Sleep(time.Until(lost.Add(walkSpacing)))
	}
}

// TestLossWalk (issue 28, item 5): nodes lose their data one group after another,
// each group walkSpacing (more than MaxTTL) after the last, in pairs and singly,
// with and without other traffic. Every acquisition succeeds, fences only increase,
// and every node that came back empty counts again by itself, within eraBound.
func TestLossWalk(t *testing.T) {
	pairs := [][]int{{0, 1}, {2, 3}, {4, 0}, {1, 2}, {3, 4}}
	singles := [][]int{{0}, {1}, {2}, {3}, {4}}
	t.Run("pairs", func(t *testing.T) { walkLosses(t, pairs, false) })
	t.Run("pairs-traffic", func(t *testing.T) { walkLosses(t, pairs, true) })
	t.Run("singles", func(t *testing.T) { walkLosses(t, singles, false) })
	t.Run("singles-traffic", func(t *testing.T) { walkLosses(t, singles, true) })
}

// TestNoNewDeploymentAfterLosses (issue 28, item 5 (c)): nodes 0 and 1 come back
// empty and the only Locker that saw them closes before their quarantine ends, so
// nobody gives them their eras; later nodes 2, 3 and 4 lose their data too. Every
// node then lacks an era, as in a new deployment, but the markers of nodes 0 and 1
// say that the deployment issued fences: TryLock must refuse rather than start the
// fences again at 1. An operator who deletes the markers and sets
// Options.FenceFloor to the last fence gets fences above it.
func TestNoNewDeploymentAfterLosses(t *testing.T) {
	healDeployment(t)
	opts := &redlock.Options{MaxTTL: walkTTL}
	a := newLocker(t, opts)
	counting(t, a, 15*time.Second)
	key := "no-new-deployment-" + driver.NewToken()[:8]
	restartEmpty(t, 0)
	restartEmpty(t, 1)
	last, err := tryFor(t, a, key, 2*time.Second)
	require.NoError(t, err, "TryLock on nodes 2, 3, 4")
	require.NoError(t, a.Unlock(t.Context(), last))
	require.NoError(t, a.Close()) // before the quarantine of nodes 0 and 1 ends
	for _, i := range []int{2, 3, 4} {
		restartEmpty(t, i)
	}
	b := newLocker(t, opts)
	refused := false // an attempt that every node answered said why
	for start := time.Now(); time.Since(start) < eraBound+500*time.Millisecond; time.Sleep(50 * time.Millisecond) {
		lease, err := b.TryLock(t.Context(), key, walkTTL)
		if err == nil {
			t.Fatalf("acquired with fence %d after fence %d, though nodes 0 and 1 kept the markers of their loss", lease.Fence, last.Fence)
		}
		refused = refused || strings.Contains(err.Error(), "operator")
	}
	require.True(t, refused, "no TryLock said that an operator must start the deployment again")
	// The operator starts the deployment again above the last fence.
	for _, s := range nodes {
		_, err := testenv.RedisCommand(t.Context(), s.Addr(), "DEL", redlock.DefaultPrefix+":node", redlock.DefaultPrefix+":quarantine")
		require.NoError(t, err)
	}
	c := newLocker(t, &redlock.Options{MaxTTL: walkTTL, FenceFloor: last.Fence})
	lease, err := c.TryLock(t.Context(), key, walkTTL)
	require.NoError(t, err)
	require.Greater(t, lease.Fence, last.Fence, "the first fence of the deployment started again with FenceFloor %d", last.Fence)
	require.NoError(t, c.Unlock(t.Context(), lease))
}

// TestFenceFloorInvalid: a FenceFloor whose era is out of range is invalid.
func TestFenceFloorInvalid(t *testing.T) {
	_, err := redlock.New(clients(t, nodeAddrs()), &redlock.Options{FenceFloor: redlock.MaxFenceFloor + 1})
	require.ErrorIs(t, err, distlock.ErrInvalid)
}

// TestNewDeploymentNodeDown: a new deployment (no markers anywhere) whose first
// attempt finds node 4 down marks nodes 0 to 3 only; node 4 is marked by a later
// attempt. The markers' epochs then differ, but no node was found empty while
// another had an era, so the later attempt with every node up brings them in.
func TestNewDeploymentNodeDown(t *testing.T) {
	healDeployment(t)
	for _, s := range nodes {
		_, err := testenv.RedisCommand(t.Context(), s.Addr(), "DEL", redlock.DefaultPrefix+":node", redlock.DefaultPrefix+":quarantine")
		require.NoError(t, err)
	}
	down(t, 4)
	l := newLocker(t, &redlock.Options{MaxTTL: walkTTL})
	key := "new-deployment-down-" + driver.NewToken()[:8]
	_, err := l.TryLock(t.Context(), key, walkTTL)
	require.Error(t, err, "TryLock with node 4 down in a new deployment")
	nodes[4].Restart(t)
	lease, err := tryFor(t, l, key, 2*time.Second)
	require.NoError(t, err, "TryLock once every node is up")
	require.NoError(t, l.Unlock(t.Context(), lease))
}
