package postgres

import (
	"context"
	"encoding/hex"
	"testing"
	"time"

	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestWaitRegistersBeforeRead: an Unlock that comes right after a Wait read the
// row (and found the key held) wakes the Wait, even when the registration was
// slow: Wait reads only once its registration is held. A Wait that read before
// its registration (or did not wait for it) misses the notification and waits the
// lease's whole minute: this test then fails.
func TestWaitRegistersBeforeRead(t *testing.T) {
	a := newLocker(t, "", &sqllock.Options{Table: "waiters"})
	w := newLocker(t, "", &sqllock.Options{Table: "waiters"})
	key := "reg-" + driver.NewToken()
	lease, err := a.TryLock(sqltest.OpCtx(t), key, time.Minute)
	require.NoError(t, err)
	w.ln.testRegister = func() { time.Sleep(300 * time.Millisecond) }
	w.testChecked = func() { require.NoError(t, a.Unlock(sqltest.OpCtx(t), lease)) }
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, w.Wait(ctx, key))
	require.Less(t, time.Since(start), 5*time.Second)
}

// TestUnlockNotifiesWaitedKeys: Unlock notifies only while some Wait has
// registered the key, on any Locker of the table.
func TestUnlockNotifiesWaitedKeys(t *testing.T) {
	a := newLocker(t, "", &sqllock.Options{Table: "waiters"})
	w := newLocker(t, "", &sqllock.Options{Table: "waiters"})
	conn, err := pgx.Connect(t.Context(), pgSrv.URL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), a.d.sql.listen)
	require.NoError(t, err)
	next := func() string { // the next notification's payload; "" after 300ms
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			require.ErrorIs(t, err, context.DeadlineExceeded)
			return ""
		}
		return n.Payload
	}
	lockUnlock := func(key string) {
		lease, err := a.TryLock(sqltest.OpCtx(t), key, time.Minute)
		require.NoError(t, err)
		require.NoError(t, a.Unlock(sqltest.OpCtx(t), lease))
	}
	quiet, waited := "quiet-"+driver.NewToken(), "waited-"+driver.NewToken()
	lockUnlock(quiet)
	require.Empty(t, next(), "Unlock of a key that no Wait registered notified")

	lease, err := a.TryLock(sqltest.OpCtx(t), waited, time.Minute)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- w.Wait(t.Context(), waited) }()
	payload := hex.EncodeToString(row(waited).Hash)
	require.Eventually(t, waiting(w, 1, true, func(lc *listenConn) bool {
		return lc.regs[payload] != nil && lc.regs[payload].held
	}), 10*time.Second, 10*time.Millisecond)
	require.NoError(t, a.Unlock(sqltest.OpCtx(t), lease))
	require.NoError(t, requireReturns(t, done, "Wait"))
	require.Equal(t, hex.EncodeToString(row(waited).Hash), next())
	lockUnlock(quiet)
	require.Empty(t, next(), "Unlock of a key that no Wait registered notified")
	lockUnlock(waited) // registered for a while after its Wait returned
	require.Equal(t, hex.EncodeToString(row(waited).Hash), next())
}
