package zklock_test

import (
	"context"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/zklock"
)

// TestRenewsShareMultis renews many leases of one Locker at once: their checks go
// in a few multis, not one request (or two) per lease, and each lease still gets
// its own answer: the leases whose nodes another client deleted, which fail the
// multis they are in, are not held, and every other lease is renewed.
func TestRenewsShareMultis(t *testing.T) {
	w := newWire()
	opts := *quiet
	opts.Dialer = w.dial
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := zklock.Connect(ctx, standaloneAddrs(), sessionTimeout, &opts)
	require.NoError(t, err)
	defer s.Close()
	l, err := zklock.New(s, &zklock.Options{TickTime: testenv.ZooKeeperTickTime})
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()
	other := connect(t, standaloneAddrs(), sessionTimeout)
	defer other.Close()

	const n = 200
	prefix := uniqueKey(t) + "-"
	leases := make([]distlock.Lease, n)
	for i := range leases {
		leases[i], err = l.TryLock(ctx, prefix+strconv.Itoa(i), 30*time.Second)
		require.NoError(t, err)
	}
	gone := map[int]bool{7: true, 8: true, 100: true, 199: true}
	for i := range gone {
		kp := keyPath(leases[i].Key)
		for _, c := range children(t, other, kp) {
			require.NoError(t, other.Delete(kp+"/"+c, -1))
		}
	}

	w.reset()
	start := time.Now()
	errs := make([]error, n)
	renewed := make([]distlock.Lease, n)
	var wg sync.WaitGroup
	for i := range leases {
		wg.Go(func() { renewed[i], errs[i] = l.Renew(ctx, leases[i], 30*time.Second) })
	}
	wg.Wait()
	for i := range leases {
		if gone[i] {
			assert.ErrorIs(t, errs[i], distlock.ErrNotHeld, "lease %d, whose node is gone", i)
			continue
		}
		if assert.NoError(t, errs[i], "lease %d", i) {
			assert.True(t, renewed[i].Expires.After(start), "lease %d: Expires after the Renew's start", i)
			assert.Equal(t, leases[i].Fence, renewed[i].Fence)
		}
	}
	ops, requests, _ := w.snapshot()
	t.Logf("%d Renews (%d of them of deleted nodes): %s", n, len(gone), ops)
	m := regexp.MustCompile(`multi=(\d+)`).FindStringSubmatch(ops)
	require.NotNil(t, m, "no multi in %q", ops)
	multis, _ := strconv.Atoi(m[1])
	assert.Equal(t, multis, requests, "only multis of checks: %s", ops)
	assert.Less(t, multis, n/4, "renewals share multis: %s", ops)
}
