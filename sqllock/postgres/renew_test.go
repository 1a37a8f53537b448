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

// TestRenewBatchExact: sqltest.RenewBatchExact.
func TestRenewBatchExact(t *testing.T) {
	l := newLocker(t, "", &sqllock.Options{Table: "renew_batch"})
	sqltest.RenewBatchExact(t, l, l.d)
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

// TestDeadlinesWhileStalled: sqltest.DeadlinesWhileStalled, the Locker's
// link through a stalled fault proxy.
func TestDeadlinesWhileStalled(t *testing.T) {
	l, p, _ := newClient(t, &sqllock.Options{Table: "renew_stall"})
	sqltest.DeadlinesWhileStalled(t, l, p.Stall, p.Heal)
}
