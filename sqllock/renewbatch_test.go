package sqllock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/stretchr/testify/require"
)

// batchDialect is a fakeDialect with RenewBatch: it records the batches, and
// renewBatch decides each row (all held when nil).
type batchDialect struct {
	fakeDialect
	block      chan struct{} // when set, the first Renew waits for it
	renewBatch func(r Row) bool

	bmu     sync.Mutex
	batches []int
}

func (d *batchDialect) Renew(ctx context.Context, r Row, ttl time.Duration) (bool, error) {
	d.bmu.Lock()
	d.batches = append(d.batches, 1)
	block := d.block
	d.block = nil
	d.bmu.Unlock()
	if block != nil {
		<-block
	}
	return d.fakeDialect.Renew(ctx, r, ttl)
}

func (d *batchDialect) RenewBatch(_ context.Context, rs []Row, _ []time.Duration) ([]bool, error) {
	d.bmu.Lock()
	d.batches = append(d.batches, len(rs))
	d.bmu.Unlock()
	held := make([]bool, len(rs))
	for i, r := range rs {
		held[i] = d.renewBatch == nil || d.renewBatch(r)
	}
	return held, nil
}

// TestRenewBatch: the Renews that come while one is in flight run as one batch,
// each with its own row's result; a second Renew of the same lease waits for the
// next batch; a caller whose context ends while queued leaves, and the rest run.
func TestRenewBatch(t *testing.T) {
	block := make(chan struct{})
	d := &batchDialect{block: block, renewBatch: func(r Row) bool { return string(r.Key) != "gone" }}
	l, err := NewLocker("fake", d, nil)
	require.NoError(t, err)
	defer l.Close()
	lease := func(key string) distlock.Lease {
		return distlock.Lease{Key: key, Token: "tok-" + key, Fence: 1, Expires: time.Now().Add(time.Minute)}
	}
	first := make(chan error, 1)
	go func() { _, err := l.Renew(t.Context(), lease("first"), time.Minute); first <- err }()
	require.Eventually(t, func() bool { d.bmu.Lock(); defer d.bmu.Unlock(); return len(d.batches) == 1 }, 5*time.Second, time.Millisecond)

	keys := []string{"a", "b", "c", "gone", "a"} // "a" twice: two batches
	errs := make([]chan error, len(keys))
	leaving, leave := context.WithCancel(t.Context())
	for i, k := range keys {
		errs[i] = make(chan error, 1)
		go func() { _, err := l.Renew(t.Context(), lease(k), time.Minute); errs[i] <- err }()
	}
	left := make(chan error, 1)
	go func() { _, err := l.Renew(leaving, lease("leaver"), time.Minute); left <- err }()
	require.Eventually(t, func() bool {
		l.renewer.mu.Lock()
		defer l.renewer.mu.Unlock()
		return len(l.renewer.queue) == len(keys)+1
	}, 5*time.Second, time.Millisecond)
	leave()
	require.ErrorIs(t, <-left, context.Canceled)
	close(block)
	require.NoError(t, <-first)
	for i, k := range keys {
		err := <-errs[i]
		if k == "gone" {
			require.ErrorIs(t, err, distlock.ErrNotHeld)
		} else {
			require.NoError(t, err, k)
		}
	}
	d.bmu.Lock()
	defer d.bmu.Unlock()
	require.Equal(t, []int{1, 4, 1}, d.batches) // first; a, b, c, gone; a again
}
