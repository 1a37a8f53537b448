package sqltest

import (
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/sqllock/sqldialect"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/sqllock"
	"github.com/stretchr/testify/require"
)

// LeaseRow returns the row that sqllock keeps for lease.
func LeaseRow(lease distlock.Lease) sqldialect.Row {
	h := sha256.Sum256([]byte(lease.Key))
	return sqldialect.Row{Hash: h[:], Key: []byte(lease.Key), Token: []byte(lease.Token)}
}

// RenewBatchExact tests that rb.RenewBatch, on the table that l keeps its rows in,
// reports each row's own result: held rows are renewed (also with a shorter ttl,
// which leaves the expiry as it is), released, expired and foreign-token rows are
// not; a renewed row's expiry is then at least the database's now + ttl, and a
// released row stays released.
func RenewBatchExact(t *testing.T, l Locker, rb sqldialect.BatchRenewer) {
	key := func(i int) string { return Key(fmt.Sprintf("batch-%d", i)) }
	held1, err := l.TryLock(OpCtx(t), key(1), time.Minute)
	require.NoError(t, err)
	held2, err := l.TryLock(OpCtx(t), key(2), time.Minute)
	require.NoError(t, err)
	released, err := l.TryLock(OpCtx(t), key(3), time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(OpCtx(t), released))
	expired, err := l.TryLock(OpCtx(t), key(4), 50*time.Millisecond)
	require.NoError(t, err)
	foreign := held1
	foreign.Token = driver.NewToken()
	time.Sleep(100 * time.Millisecond) // expired's ttl lapses

	rs := []sqldialect.Row{LeaseRow(held1), LeaseRow(released), LeaseRow(held2), LeaseRow(expired), LeaseRow(foreign)}
	ttls := []time.Duration{2 * time.Minute, time.Minute, time.Second, time.Minute, time.Minute}
	held, err := rb.RenewBatch(OpCtx(t), rs, ttls)
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, true, false, false}, held)

	h, err := l.Inspect(OpCtx(t), held1.Key)
	require.NoError(t, err)
	require.Greater(t, time.Until(h.Expires), 110*time.Second, "renewed for 2 minutes")
	h, err = l.Inspect(OpCtx(t), held2.Key)
	require.NoError(t, err)
	require.Greater(t, time.Until(h.Expires), 50*time.Second, "a shorter ttl does not shorten")
	_, err = l.Inspect(OpCtx(t), released.Key)
	require.ErrorIs(t, err, distlock.ErrNotHeld)
}

// testRenewMany: concurrent Renews of many leases of one Locker (batched where the
// dialect is a BatchRenewer) each get their own lease's result, and each row then
// expires no earlier than its new Expires.
func (e Env) testRenewMany(t *testing.T) {
	l := e.New(t, &sqllock.Options{Table: "renew_many"})
	const n = 300
	leases := make([]distlock.Lease, n)
	for i := range leases {
		var err error
		leases[i], err = l.TryLock(OpCtx(t), Key(fmt.Sprintf("many-%d", i)), 10*time.Second)
		require.NoError(t, err)
	}
	require.NoError(t, l.Unlock(OpCtx(t), leases[7]))
	renewed := make([]distlock.Lease, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range leases {
		wg.Go(func() { renewed[i], errs[i] = l.Renew(OpCtx(t), leases[i], time.Minute) })
	}
	wg.Wait()
	for i := range leases {
		if i == 7 {
			require.ErrorIs(t, errs[i], distlock.ErrNotHeld)
			continue
		}
		require.NoError(t, errs[i])
		t0 := time.Now()
		h, err := l.Inspect(OpCtx(t), leases[i].Key)
		took := time.Since(t0)
		require.NoError(t, err)
		require.Equal(t, leases[i].Fence, h.Fence)
		// Holder.Expires is a local time during Inspect plus the row's remaining
		// ttl as the database reads it (in whole milliseconds on some): the row
		// expires no earlier than Holder.Expires - took.
		require.False(t, h.Expires.Add(took+2*time.Millisecond).Before(renewed[i].Expires),
			"row %d expires before its Expires", i)
	}
}
