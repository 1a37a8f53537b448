package sqllock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/distlock/distlock/sqllock/sqldialect"

	"github.com/distlock/distlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// batchDialect is a fakeDialect with RenewBatch: it records the batches, and
// renewBatch decides each row (all held when nil).
type batchDialect struct {
	fakeDialect
	block      chan struct{} // when set, the first Renew waits for it
	renewBatch func(r sqldialect.Row) bool

	bmu     sync.Mutex
	batches []int
}

func (d *batchDialect) Renew(ctx context.Context, r sqldialect.Row, ttl time.Duration) (bool, error) {
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

func (d *batchDialect) RenewBatch(_ context.Context, rs []sqldialect.Row, _ []time.Duration) ([]bool, error) {
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
	d := &batchDialect{block: block, renewBatch: func(r sqldialect.Row) bool { return string(r.Key) != "gone" }}
	l, err := NewLocker("fake", d, nil)
	require.NoError(t, err)
	defer l.Close()
	l.rows.renews = newRenews(d, d, time.Hour, l.calls.Go) // the first statement holds the queue up until it ends
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
		return l.rows.renews.Queued() == len(keys)+1
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

// stallDialect is a batchDialect whose statements stall, as on a link that holds
// every byte: each Renew and RenewBatch waits until its context ends.
type stallDialect struct{ batchDialect }

func (d *stallDialect) Renew(ctx context.Context, _ sqldialect.Row, _ time.Duration) (bool, error) {
	d.bmu.Lock()
	d.batches = append(d.batches, 1)
	d.bmu.Unlock()
	<-ctx.Done()
	return false, ctx.Err()
}

func (d *stallDialect) RenewBatch(ctx context.Context, rs []sqldialect.Row, _ []time.Duration) ([]bool, error) {
	d.bmu.Lock()
	d.batches = append(d.batches, len(rs))
	d.bmu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestRenewBatchOwnDeadlines: while the statements stall, many Renews with
// different deadlines renewed at once through one Locker each return at their own
// deadline, whether they run alone, are in a batch in flight (the first of the
// batch, whose deadline is the earliest, included) or are queued behind it; the
// Renews still share one statement. It runs in a synctest bubble: time moves only
// when every goroutine waits, so each call must return at its deadline exactly.
func TestRenewBatchOwnDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &stallDialect{}
		l, err := NewLocker("sqllock/fake", d, nil)
		require.NoError(t, err)
		defer l.Close()
		l.rows.renews = newRenews(d, d, time.Hour, l.calls.Go) // the batches wait for the stalled statements
		lease := func(i int) distlock.Lease {
			return distlock.Lease{Key: fmt.Sprint("k", i), Token: fmt.Sprint("tok", i), Fence: 1, Expires: time.Now().Add(time.Minute)}
		}
		var wg sync.WaitGroup
		took := make([]time.Duration, 30)
		deadline := func(i int) time.Duration { return time.Second + time.Duration(i)*100*time.Millisecond }
		renew := func(i int) {
			wg.Go(func() {
				start := time.Now()
				ctx, cancel := context.WithTimeout(t.Context(), deadline(i))
				defer cancel()
				_, err := l.Renew(ctx, lease(i), time.Minute)
				took[i] = time.Since(start)
				assert.ErrorIs(t, err, context.DeadlineExceeded, "Renew %d", i)
			})
		}
		renew(0) // alone: its statement is in flight
		synctest.Wait()
		for i := 1; i < 20; i++ { // the next batch
			renew(i)
		}
		synctest.Wait()
		time.Sleep(deadline(0)) // Renew 0 gives up; the batch of 1-19 is sent
		synctest.Wait()
		for i := 20; i < 30; i++ { // queued behind it
			renew(i)
		}
		wg.Wait()
		for i, d := range took {
			require.Equal(t, deadline(i), d, "Renew %d, whose deadline was %v, returned after %v", i, deadline(i), d)
		}
		d.bmu.Lock()
		defer d.bmu.Unlock()
		require.Equal(t, []int{1, 19, 10}, d.batches)
	})
}

// stuckDialect is a batchDialect whose statements of the key "stuck" wait until
// their context ends (its row is locked by a long transaction); the others
// succeed at once.
type stuckDialect struct{ batchDialect }

func (d *stuckDialect) Renew(ctx context.Context, r sqldialect.Row, ttl time.Duration) (bool, error) {
	held, err := d.RenewBatch(ctx, []sqldialect.Row{r}, []time.Duration{ttl})
	return err == nil && held[0], err
}

func (d *stuckDialect) RenewBatch(ctx context.Context, rs []sqldialect.Row, _ []time.Duration) ([]bool, error) {
	d.bmu.Lock()
	d.batches = append(d.batches, len(rs))
	d.bmu.Unlock()
	if slices.ContainsFunc(rs, func(r sqldialect.Row) bool { return string(r.Key) == "stuck" }) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	held := make([]bool, len(rs))
	for i := range held {
		held[i] = true
	}
	return held, nil
}

// TestRenewBatchStall: a Renew whose statement is stuck holds up the Renews
// queued behind it for renewStall only: they then go as a batch of their own and
// are renewed; the stuck one returns at its deadline. In a synctest bubble.
func TestRenewBatchStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &stuckDialect{}
		l, err := NewLocker("sqllock/fake", d, nil)
		require.NoError(t, err)
		defer l.Close()
		lease := func(key string) distlock.Lease {
			return distlock.Lease{Key: key, Token: "tok-" + key, Fence: 1, Expires: time.Now().Add(time.Minute)}
		}
		start := time.Now()
		stuck := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err := l.Renew(ctx, lease("stuck"), time.Minute)
			stuck <- err
		}()
		synctest.Wait()
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Go(func() {
				_, err := l.Renew(t.Context(), lease(fmt.Sprint("k", i)), time.Minute)
				assert.NoError(t, err, "Renew %d behind the stuck one", i)
				assert.Equal(t, renewStall, time.Since(start), "Renew %d behind the stuck one", i)
			})
		}
		wg.Wait()
		require.ErrorIs(t, <-stuck, context.DeadlineExceeded)
		require.Equal(t, 10*time.Second, time.Since(start))
		d.bmu.Lock()
		defer d.bmu.Unlock()
		require.Equal(t, []int{1, 10}, d.batches)
	})
}
