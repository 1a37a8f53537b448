package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
	"github.com/stretchr/testify/assert"
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
		leases[i], err = l.TryLock(sqltest.OpCtx(b), fmt.Sprintf("renew-%d-%s", i, driver.NewToken()), time.Minute)
		require.NoError(b, err)
	}
	var (
		mu   sync.Mutex
		next int
	)
	b.SetParallelism(32)
	b.ResetTimer() // not the TryLocks
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

// TestRenewBatchStatements: Renews of many leases from 64 goroutines sharing a
// Locker (as distlock.Hold of many leases makes them) share statements: those
// that come while one is in flight go as one batch, so that a Renew costs a small
// fraction of a round trip (alone, each costs one).
func TestRenewBatchStatements(t *testing.T) {
	const goroutines, leases, rounds = 64, 1000, 3
	var stmts counter
	l, _ := countedLocker(t, "renew_stmts", 20, &stmts)
	held := make([]distlock.Lease, leases)
	for i := range held {
		var err error
		held[i], err = l.TryLock(sqltest.OpCtx(t), sqltest.Key(fmt.Sprint("renew-stmts-", i)), time.Minute)
		require.NoError(t, err)
	}
	before := stmts.n.Load()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := g; i < leases*rounds; i += goroutines {
				_, err := l.Renew(sqltest.OpCtx(t), held[i%leases], time.Minute)
				if !assertNoError(t, err) {
					return
				}
			}
		})
	}
	wg.Wait()
	sent := stmts.n.Load() - before
	perRenew := float64(sent) / float64(leases*rounds)
	t.Logf("%d statements for %d Renews: %.3f a Renew", sent, leases*rounds, perRenew)
	require.Less(t, perRenew, 0.2, "statements per Renew of 64 concurrent callers")
}

// TestRenewStuckRow: a Renew whose statement waits for its row (locked by a long
// transaction) holds up the Locker's other Renews only for a moment: they then go
// without it, and get their leases renewed within their deadlines; the stuck one
// renews once the row is free.
func TestRenewStuckRow(t *testing.T) {
	var stmts counter
	l, _ := countedLocker(t, "renew_stuck", 4, &stmts)
	admin := newPool(t, "")
	leases := make([]distlock.Lease, 11)
	for i := range leases {
		var err error
		leases[i], err = l.TryLock(sqltest.OpCtx(t), sqltest.Key(fmt.Sprint("renew-stuck-", i)), time.Minute)
		require.NoError(t, err)
	}
	commit := lockRows(t, admin, "renew_stuck", leases[0].Key)
	stuck := make(chan error, 1)
	go func() {
		_, err := l.Renew(sqltest.OpCtx(t), leases[0], time.Minute)
		stuck <- err
	}()
	require.Eventually(t, lockWaits(t, admin, "UPDATE %renew_stuck%", 1), 10*time.Second, 5*time.Millisecond)
	var wg sync.WaitGroup
	for i := 1; i < len(leases); i++ {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			_, err := l.Renew(ctx, leases[i], time.Minute)
			assert.NoError(t, err, "Renew %d behind a Renew that waits for its row", i)
		})
	}
	wg.Wait()
	select {
	case err := <-stuck:
		t.Fatalf("the Renew of the locked row returned before its row was free: %v", err)
	default:
	}
	commit()
	require.NoError(t, <-stuck)
}
