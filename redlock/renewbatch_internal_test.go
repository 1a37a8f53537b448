package redlock

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRenewBatchBound: the line hands out its Renews oldest first, at most 1,024
// per batch (four renewManyScript calls per node), skips those whose callers left,
// and is idle once none waits.
func TestRenewBatchBound(t *testing.T) {
	const bound = 1024
	var rs renewals
	rs.busy = true
	const n = 2*bound + 10
	live := 0
	for i := range n {
		r := &renewal{ms: int64(i)}
		if i%7 == 3 {
			r.state.Store(abandoned)
		} else {
			live++
		}
		rs.pending = append(rs.pending, r)
	}
	next := int64(0)
	batches := 0
	for batch := rs.take(); batch != nil; batch = rs.take() {
		batches++
		require.LessOrEqual(t, len(batch), bound)
		for _, r := range batch {
			for next%7 == 3 {
				next++
			}
			require.Equal(t, next, r.ms, "batch %d: not the oldest waiting Renew", batches)
			next++
		}
		require.True(t, rs.busy, "the line is idle while a batch is out")
	}
	require.Equal(t, int64(n), next)
	require.Equal(t, (live+bound-1)/bound, batches)
	require.False(t, rs.busy)
	require.Empty(t, rs.pending)
}
