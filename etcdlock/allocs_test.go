package etcdlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock/driver"
	"github.com/stretchr/testify/require"
)

// Bounds of the allocations of a client's calls (gRPC's and clientv3's
// included), generous against the counts of this version (TryLock+Unlock about
// 270, Renew of a held lease about 205).
const (
	maxPairAllocs  = 285
	maxRenewAllocs = 230
)

// TestAllocsTryLockUnlock guards the allocations of an uncontended TryLock+Unlock
// pair (W1 of the benchmarks: client CPU is most of its time).
func TestAllocsTryLockUnlock(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("allocation counts differ under -race")
	}
	l := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), nil)
	ctx := context.Background()
	key := "allocs-" + driver.NewToken()
	pair := func() {
		lease, err := l.TryLock(ctx, key, 10*time.Second)
		require.NoError(t, err)
		require.NoError(t, l.Unlock(ctx, lease))
	}
	pair() // the spare lease, the connection
	n := testing.AllocsPerRun(200, pair)
	t.Logf("%.1f allocations per TryLock+Unlock", n)
	require.LessOrEqual(t, n, float64(maxPairAllocs), "allocations per TryLock+Unlock pair")
}

// TestAllocsRenew guards the allocations of a Renew of a held lease as Hold makes
// it (a context that ends at the lease's Expires): W5 of the benchmarks holds
// 10,000 leases, and what its renewals in flight hold is heap per lease.
func TestAllocsRenew(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("allocation counts differ under -race")
	}
	l := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), nil)
	const ttl = 3 * time.Second
	lease, err := l.TryLock(context.Background(), "allocs-"+driver.NewToken(), ttl)
	require.NoError(t, err)
	renew := func() {
		ctx, cancel := context.WithDeadline(context.Background(), lease.Expires)
		defer cancel()
		lease, err = l.Renew(ctx, lease, ttl)
		require.NoError(t, err)
	}
	renew() // the keepalive stream
	n := testing.AllocsPerRun(200, renew)
	t.Logf("%.1f allocations per Renew", n)
	require.LessOrEqual(t, n, float64(maxRenewAllocs), "allocations per Renew")
}
