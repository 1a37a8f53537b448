package redlock_test

import (
	"errors"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/faultproxy"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/redlock"
)

// warmUp dials l's connections to every node and loads its scripts there, so that
// its next call costs one round trip per node.
func warmUp(t *testing.T, l *redlock.Locker) {
	t.Helper()
	lease, err := l.TryLock(t.Context(), "warm-up-"+driver.NewToken()[:8], 10*time.Second)
	if err != nil {
		t.Fatalf("warm-up TryLock: %v", err)
	}
	if err := l.Unlock(t.Context(), lease); err != nil {
		t.Fatalf("warm-up Unlock: %v", err)
	}
}

// pttl returns the remaining time to live of the Redis key name on node i.
func pttl(t *testing.T, i int, name string) time.Duration {
	t.Helper()
	v, err := testenv.RedisCommand(t.Context(), nodes[i].Addr(), "PTTL", name)
	if err != nil {
		t.Fatalf("PTTL on node %d: %v", i, err)
	}
	ms, _ := v.(int64)
	return time.Duration(ms) * time.Millisecond
}

var evalshaCalls = regexp.MustCompile(`cmdstat_evalsha:calls=(\d+)`)

// evalshas returns how many EVALSHA commands node i has run (-1 after an error, which
// fails t). It may run off the test's goroutine.
func evalshas(t *testing.T, i int) int {
	v, err := testenv.RedisCommand(t.Context(), nodes[i].Addr(), "INFO", "commandstats")
	if err != nil {
		t.Errorf("INFO commandstats on node %d: %v", i, err)
		return -1
	}
	s, _ := v.(string)
	m := evalshaCalls.FindStringSubmatch(s)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestRenewNeverShortens: a Renew with a ttl shorter than what the locks have left
// succeeds and leaves every node's lock as long as it was.
func TestRenewNeverShortens(t *testing.T) {
	l := newLocker(t, nil)
	key := "never-shortens-" + driver.NewToken()[:8]
	lease, err := l.TryLock(t.Context(), key, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	short, err := l.Renew(t.Context(), lease, time.Second)
	if err != nil {
		t.Fatalf("Renew with a shorter ttl: %v", err)
	}
	if left := short.Remaining(); left > time.Second {
		t.Fatalf("Renew with ttl 1s returned a lease with %v left", left)
	}
	for i := range nodes {
		if left := pttl(t, i, lockName(key)); left < 25*time.Second {
			t.Fatalf("Renew with ttl 1s cut node %d's lock to %v; it must keep about 30s", i, left)
		}
	}
	if err := l.Unlock(t.Context(), short); err != nil {
		t.Fatal(err)
	}
}

// TestShorteningRenewPausedMajority (issue 12, part 5): C holds on five nodes with ttl
// 30s and Renews with 3s while three nodes are paused: two extend, three time out,
// Renew fails with an unknown outcome. The three then run the queued script. D must
// not acquire while C's old Expires is ahead: a Renew never shortens a lock.
func TestShorteningRenewPausedMajority(t *testing.T) {
	c := newLocker(t, nil)
	d := newLocker(t, nil)
	key := "shortening-renew-" + driver.NewToken()[:8]
	lease, err := c.TryLock(t.Context(), key, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	paused := []int{0, 1, 2}
	before := make(map[int]int)
	for _, i := range paused {
		before[i] = evalshas(t, i)
		nodes[i].Pause(t)
	}
	const short = 3 * time.Second
	start := time.Now()
	_, err = c.Renew(t.Context(), lease, short)
	if err == nil || errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("Renew with 3 of 5 nodes paused: got %v, want an error that is not ErrNotHeld", err)
	}
	for _, i := range paused {
		nodes[i].Resume(t)
	}
	// The paused nodes run the Renew they had queued.
	for _, i := range paused {
		require.Eventually(t, func() bool { return evalshas(t, i) > before[i] }, 5*time.Second, 10*time.Millisecond,
			"node %d never ran the queued Renew", i)
	}
	until := start.Add(short + 1500*time.Millisecond)
	for time.Now().Before(until) {
		ld, err := d.TryLock(t.Context(), key, time.Minute)
		if err == nil {
			_ = d.Unlock(t.Context(), ld)
			t.Fatalf("D acquired %v after C's Renew with ttl %v failed, while C's Expires is %v ahead", time.Since(start), short, lease.Remaining())
		}
		if !errors.Is(err, distlock.ErrLocked) {
			t.Fatalf("D's TryLock: %v", err)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := c.Unlock(t.Context(), lease); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// TestLateGrantEmptyScriptCache (issue 12, part 5): a node whose script cache is empty
// (as after any restart) and whose phase-1 answer comes after the attempt's per-node
// deadline still joins the lease: the EVAL that follows its NOSCRIPT reply must not
// run on the attempt's expired context.
func TestLateGrantEmptyScriptCache(t *testing.T) {
	const nodeTimeout = 200 * time.Millisecond
	l := newLocker(t, &redlock.Options{NodeTimeout: nodeTimeout})
	key := "late-noscript-" + driver.NewToken()[:8]
	warmUp(t, l)
	_, fenceName, _ := redlock.Names(redlock.DefaultPrefix, key)
	if _, err := testenv.RedisCommand(t.Context(), nodes[0].Addr(), "SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	nodes[0].Pause(t)
	lease, err := l.TryLock(t.Context(), key, 30*time.Second)
	if err != nil {
		t.Fatalf("TryLock with node 0 paused: %v", err)
	}
	// Resume node 0 only after the attempt's per-node deadline (at most nodeTimeout
	// after the fan-out began, which was before TryLock returned) has passed, so its
	// NOSCRIPT reply comes late.
	time.Sleep(nodeTimeout + 10*time.Millisecond)
	nodes[0].Resume(t)
	require.Eventually(t, func() bool {
		held, err := rawExists(t.Context(), 0, lockName(key))
		if err != nil || !held {
			return false
		}
		v, _ := testenv.RedisCommand(t.Context(), nodes[0].Addr(), "GET", fenceName)
		s, _ := v.(string)
		f, _ := strconv.ParseUint(s, 10, 64)
		return f >= lease.Fence
	}, 5*time.Second, 10*time.Millisecond, "node 0, with an empty script cache and a late answer, never joined the lease")
	if err := l.Unlock(t.Context(), lease); err != nil {
		t.Fatal(err)
	}
	// Unlock returns once a quorum released (the other releases run on), so node
	// 0's lock goes soon after, not at once; left alone it would stay for its 30s.
	require.Eventually(t, func() bool {
		held, err := rawExists(t.Context(), 0, lockName(key))
		return err == nil && !held
	}, 5*time.Second, 10*time.Millisecond, "node 0 keeps the lock after Unlock")
}

// TestSuspectsThatRecovered: a Locker whose calls to every node timed out (all five
// are suspects) makes its next TryLock, once the network is back but slower on four
// nodes than on the fifth, wait for the suspects: their silence alone must not decide
// a failure when the first node has answered.
func TestSuspectsThatRecovered(t *testing.T) {
	var proxies []*faultproxy.Proxy
	var addrs []string
	for _, s := range nodes {
		p, err := faultproxy.New(s.Addr(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		proxies = append(proxies, p)
		addrs = append(addrs, p.Addr())
	}
	l, err := redlock.New(clients(t, addrs), &redlock.Options{NodeTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	warmUp(t, l)
	key := "suspects-" + driver.NewToken()[:8]
	for _, p := range proxies {
		p.Blackhole()
	}
	if _, err := l.TryLock(t.Context(), key, 2*time.Second); err == nil {
		t.Fatalf("TryLock through blackholes succeeded")
	}
	for i, p := range proxies {
		p.Heal()
		if i > 0 {
			p.Delay(20 * time.Millisecond) // well within the node timeout of 200ms
		}
	}
	lease, err := l.TryLock(t.Context(), key, 2*time.Second)
	if err != nil {
		t.Fatalf("TryLock once the nodes answer again (four of them 40ms later than the fifth): %v", err)
	}
	if err := l.Unlock(t.Context(), lease); err != nil {
		t.Fatal(err)
	}
}
