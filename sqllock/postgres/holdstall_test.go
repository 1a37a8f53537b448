package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock"
)

// TestHoldStalledLink is issue 28's reproduction of a Held that outlived its lease:
// 30 leases of one Locker held with Hold, ttls from 1s to 4s so that their renewals
// batch, then the Locker's link to PostgreSQL stalls. Every Held's Context must end
// by its lease's Expires (plus the scheduler's latency), whatever the batched
// Renews do; the database frees the rows then, and another client may take them.
func TestHoldStalledLink(t *testing.T) {
	l, p, _ := newClient(t, &sqllock.Options{Table: "holdstall"})
	const n = 30
	held := make([]*distlock.Held, n)
	ended := make([]chan time.Time, n)
	for i := range held {
		ttl := time.Second + time.Duration(i)*100*time.Millisecond
		lease, err := l.TryLock(t.Context(), fmt.Sprint("holdstall-", i), ttl)
		require.NoError(t, err)
		held[i] = distlock.Hold(t.Context(), l, lease, &distlock.HoldOptions{TTL: ttl})
		ended[i] = make(chan time.Time, 1)
		context.AfterFunc(held[i].Context(), func() { ended[i] <- time.Now() })
	}
	// Stall once every lease has been renewed (their renewals batch) at least once.
	first := make([]time.Time, n)
	for i, h := range held {
		first[i] = h.Lease().Expires
	}
	require.Eventually(t, func() bool {
		for i, h := range held {
			if !h.Lease().Expires.After(first[i]) {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "every lease renewed once")
	p.Stall()
	defer p.Heal()
	const allowance = 100 * time.Millisecond
	var worst time.Duration
	for i, h := range held {
		var end time.Time
		select {
		case end = <-ended[i]:
		case <-time.After(time.Until(h.Lease().Expires) + 2*time.Second):
			t.Fatalf("Held %d's Context still alive 2s after its lease's Expires", i)
		}
		late := end.Sub(h.Lease().Expires)
		worst = max(worst, late)
		require.LessOrEqual(t, late, allowance, "Held %d's Context ended %v after its lease's Expires", i, late)
		require.ErrorIs(t, context.Cause(h.Context()), distlock.ErrNotHeld)
	}
	t.Logf("latest end of a Held's Context after its Expires: %v", worst)
	p.Heal()
	for _, h := range held {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		_ = h.Release(ctx)
		cancel()
	}
}
