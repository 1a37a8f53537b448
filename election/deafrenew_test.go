package election_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/election"
	"github.com/distlock/distlock/internal/locktest"
	"github.com/distlock/distlock/memlock"
)

// TestLeadershipEndsByExpiresWhateverRenewDoes: the leader's Context ends at its
// lease's Expires while a renewal that ignores its ctx is stuck, so that a new
// leader elected after the expiry never overlaps it.
func TestLeadershipEndsByExpiresWhateverRenewDoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := locktest.NewDeafRenew(memlock.New())
		defer close(d.Release)
		e, err := election.New(d, "k", &election.Options{TTL: 3 * time.Second})
		require.NoError(t, err)
		lead, err := e.Campaign(t.Context())
		require.NoError(t, err)
		expires := lead.Lease().Expires
		<-d.Entered
		<-lead.Context().Done()
		require.Zero(t, time.Since(expires), "the leader's Context did not end at its lease's Expires")
		require.ErrorIs(t, context.Cause(lead.Context()), distlock.ErrNotHeld)
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, lead.Resign(ctx), distlock.ErrNotHeld)
	})
}
