package postgres

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
	"github.com/stretchr/testify/require"
)

// TestRestartKeepsLease: a lease survives a restart of PostgreSQL (a fast shutdown,
// and a crash by SIGKILL): its holder renews it, other clients still get
// ErrLocked, and the fence goes on from where it was.
func TestRestartKeepsLease(t *testing.T) {
	if pgSrv.External() {
		t.Fatal("this test restarts PostgreSQL, so DISTLOCK_POSTGRES_URL must be unset")
	}
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			a, _, _ := newClient(t, &sqllock.Options{Table: "restart"})
			b, _, _ := newClient(t, &sqllock.Options{Table: "restart"})
			key := sqltest.Key("restart")
			la, err := a.TryLock(sqltest.OpCtx(t), key, time.Minute)
			require.NoError(t, err)
			if crash {
				pgSrv.Kill(t)
			}
			pgSrv.Restart(t)

			// Other clients: ErrLocked once the server answers (transport errors from
			// connections that died with the old server are retried).
			deadline := time.Now().Add(30 * time.Second)
			for {
				lb, err := b.TryLock(sqltest.OpCtx(t), key, time.Minute)
				require.Error(t, err, "another client acquired the key (Fence %d) after the restart: the lease was lost", lb.Fence)
				if errors.Is(err, distlock.ErrLocked) {
					break
				}
				require.True(t, time.Now().Before(deadline), "no ErrLocked from another client 30s after the restart: %v", err)
				time.Sleep(20 * time.Millisecond) // pacing the attempts, bounded by the deadline
			}
			// The holder renews.
			var next distlock.Lease
			for {
				next, err = a.Renew(sqltest.OpCtx(t), la, time.Minute)
				require.NotErrorIs(t, err, distlock.ErrNotHeld, "the holder's Renew after the restart")
				if err == nil {
					break
				}
				require.True(t, time.Now().Before(deadline), "the holder cannot renew 30s after the restart: %v", err)
				time.Sleep(20 * time.Millisecond) // pacing the attempts, bounded by the deadline
			}
			require.Equal(t, la.Fence, next.Fence)
			require.Equal(t, la.Token, next.Token)
			h, err := b.Inspect(sqltest.OpCtx(t), key)
			require.NoError(t, err)
			require.Equal(t, la.Fence, h.Fence)
			require.NoError(t, a.Unlock(sqltest.OpCtx(t), next))
			lb, err := b.TryLock(sqltest.OpCtx(t), key, time.Minute)
			require.NoError(t, err)
			require.Equal(t, la.Fence+1, lb.Fence)
			require.NoError(t, b.Unlock(sqltest.OpCtx(t), lb))
		})
	}
}
