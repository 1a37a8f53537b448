package sqlite

import (
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
	"github.com/stretchr/testify/require"
)

func leaseRow(lease distlock.Lease) sqllock.Row {
	h := sha256.Sum256([]byte(lease.Key))
	return sqllock.Row{Hash: h[:], Key: []byte(lease.Key), Token: []byte(lease.Token)}
}

// TestRenewBatchExact: RenewBatch reports each row's own result: held rows are
// renewed (also with a shorter ttl, which leaves the expiry as it is), released,
// expired and foreign-token rows are not.
func TestRenewBatchExact(t *testing.T) {
	db := newDB(t, filepath.Join(t.TempDir(), "locks.db"))
	l, err := New(sqltest.OpCtx(t), db, &sqllock.Options{Table: "renew_batch"})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	d := &dialect{db: db, sql: newStatements("renew_batch"), gate: gateOf(db)}
	t.Cleanup(func() { releaseGate(db) })
	key := func(i int) string { return fmt.Sprintf("batch-%d-%s", i, distlock.NewToken()) }
	held1, err := l.TryLock(sqltest.OpCtx(t), key(1), time.Minute)
	require.NoError(t, err)
	held2, err := l.TryLock(sqltest.OpCtx(t), key(2), time.Minute)
	require.NoError(t, err)
	released, err := l.TryLock(sqltest.OpCtx(t), key(3), time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(sqltest.OpCtx(t), released))
	expired, err := l.TryLock(sqltest.OpCtx(t), key(4), 50*time.Millisecond)
	require.NoError(t, err)
	foreign := held1
	foreign.Token = distlock.NewToken()
	time.Sleep(100 * time.Millisecond)

	rs := []sqllock.Row{leaseRow(held1), leaseRow(released), leaseRow(held2), leaseRow(expired), leaseRow(foreign)}
	ttls := []time.Duration{2 * time.Minute, time.Minute, time.Second, time.Minute, time.Minute}
	held, err := d.RenewBatch(sqltest.OpCtx(t), rs, ttls)
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, true, false, false}, held)

	h, err := l.Inspect(sqltest.OpCtx(t), held1.Key)
	require.NoError(t, err)
	require.Greater(t, time.Until(h.Expires), 110*time.Second, "renewed for 2 minutes")
	h, err = l.Inspect(sqltest.OpCtx(t), held2.Key)
	require.NoError(t, err)
	require.Greater(t, time.Until(h.Expires), 50*time.Second, "a shorter ttl does not shorten")
}

// TestRenewMany: concurrent Renews of many leases (batched) each get their own
// lease's result, and each row then expires no earlier than its new Expires.
func TestRenewMany(t *testing.T) {
	l, _ := newClient(t, filepath.Join(t.TempDir(), "locks.db"), &sqllock.Options{Table: "renew_many"})
	const n = 300
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
		require.False(t, h.Expires.Add(took+2*time.Millisecond).Before(renewed[i].Expires),
			"row %d expires before its Expires", i)
	}
}
