package postgres

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
	"github.com/stretchr/testify/require"
)

// TestRenewMany: concurrent Renews of many leases (batched in one statement each
// round) each get their own lease's result, and each row then expires no earlier
// than its new Expires.
func TestRenewMany(t *testing.T) {
	l := newLocker(t, "", &sqllock.Options{Table: "renew_many"})
	const n = 200
	leases := make([]distlock.Lease, n)
	for i := range leases {
		var err error
		leases[i], err = l.TryLock(sqltest.OpCtx(t), fmt.Sprintf("many-%d-%s", i, distlock.NewToken()), 10*time.Second)
		require.NoError(t, err)
	}
	require.NoError(t, l.Unlock(sqltest.OpCtx(t), leases[7]))
	renewed := make([]distlock.Lease, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range leases {
		wg.Go(func() { renewed[i], errs[i] = l.Renew(sqltest.OpCtx(t), leases[i], time.Minute) })
	}
	wg.Wait()
	for i := range leases {
		if i == 7 {
			require.ErrorIs(t, errs[i], distlock.ErrNotHeld)
			continue
		}
		require.NoError(t, errs[i])
		t0 := time.Now()
		h, err := l.Inspect(sqltest.OpCtx(t), leases[i].Key)
		took := time.Since(t0)
		require.NoError(t, err)
		require.Equal(t, leases[i].Fence, h.Fence)
		// Holder.Expires is a local time during Inspect + the server's remaining
		// ttl: the row expires no earlier than Holder.Expires - took.
		require.False(t, h.Expires.Add(took+time.Millisecond).Before(renewed[i].Expires),
			"row %d expires before its Expires", i)
	}
}

// BenchmarkRenewMany measures Renews of 2,000 held leases from 64 goroutines
// sharing one Locker (a pool of 20 connections), as distlock.Hold of many leases
// makes them: ns/op is one Renew's share.
func BenchmarkRenewMany(b *testing.B) {
	l, err := New(sqltest.OpCtx(b), newPoolN(b, "", 20), &sqllock.Options{Table: "bench"})
	require.NoError(b, err)
	b.Cleanup(func() { l.Close() })
	leases := make([]distlock.Lease, 2000)
	for i := range leases {
		leases[i], err = l.TryLock(sqltest.OpCtx(b), fmt.Sprintf("renew-%d-%s", i, distlock.NewToken()), time.Minute)
		require.NoError(b, err)
	}
	var (
		mu   sync.Mutex
		next int
	)
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			mu.Lock()
			i := next % len(leases)
			next++
			mu.Unlock()
			if _, err := l.Renew(b.Context(), leases[i], time.Minute); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
