package sqltest

import (
	"crypto/rand"
	"errors"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/sqllock"
	"github.com/stretchr/testify/require"
)

// testPrune: Prune deletes free rows whose lease ended more than olderThan ago, in
// batches, and never a held row; a pruned key that is acquired again gets a fence
// above every fence it had (and above every pruned row's).
func (e Env) testPrune(t *testing.T) {
	table := "prune_" + strings.ToLower(driver.NewToken()[:8])
	l := e.New(t, &sqllock.Options{Table: table})
	pruned, held := Key("pruned"), Key("held")
	var last distlock.Lease
	for range 3 {
		lease, err := l.TryLock(OpCtx(t), pruned, time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Unlock(OpCtx(t), lease))
		last = lease
	}
	require.EqualValues(t, 3, last.Fence)
	hl, err := l.TryLock(OpCtx(t), held, time.Minute)
	require.NoError(t, err)

	n, err := l.Prune(OpCtx(t), time.Hour)
	require.NoError(t, err)
	require.Zero(t, n, "Prune(1h) deleted rows freed just now")

	// More rows than one batch, long expired, with fences up to 5000.
	const extra = 1100
	var top int64
	for range extra {
		var kh [32]byte
		_, _ = rand.Read(kh[:])
		fence := 1 + mrand.Int64N(5000)
		top = max(top, fence)
		e.Exec(t, e.InsertExpired(table), kh[:], []byte("gone"), []byte("tok"), fence)
	}
	// The released row expired at the database's now: prune once the clock moved
	// past it (SQLite counts milliseconds).
	var total int64
	for deadline := time.Now().Add(10 * time.Second); total < extra+1 && time.Now().Before(deadline); {
		n, err := l.Prune(OpCtx(t), 0)
		require.NoError(t, err)
		total += n
	}
	require.EqualValues(t, extra+1, total, "rows pruned")

	// The held key is still held, by the same lease.
	_, err = l.Renew(OpCtx(t), hl, time.Minute)
	require.NoError(t, err, "Renew of a held key after Prune")
	h, err := l.Inspect(OpCtx(t), held)
	require.NoError(t, err)
	require.Equal(t, hl.Fence, h.Fence)

	// The pruned key starts above the high-water mark: above its own last fence
	// and every pruned row's.
	again, err := l.TryLock(OpCtx(t), pruned, time.Minute)
	require.NoError(t, err)
	require.Greater(t, int64(again.Fence), max(top, int64(last.Fence)), "fence of a pruned key acquired again (its last was %d; the pruned rows' largest %d)", last.Fence, top)
	fresh, err := l.TryLock(OpCtx(t), Key("fresh"), time.Minute)
	require.NoError(t, err)
	require.Greater(t, int64(fresh.Fence), top, "fence of a new key after Prune")
	n, err = l.Prune(OpCtx(t), 0) // the high-water row is still there
	require.NoError(t, err)
	require.Zero(t, n)
}

// testPruneWhileAcquiring: clients take turns on a few keys while Prune deletes
// every free row over and over: each key's fences still strictly increase in the
// order of its acquisitions.
func (e Env) testPruneWhileAcquiring(t *testing.T) {
	table := "prunerace_" + strings.ToLower(driver.NewToken()[:8])
	const clients, turns = 4, 60
	keys := []string{Key("race-a"), Key("race-b"), Key("race-c")}
	ls := make([]Locker, clients)
	for i := range ls {
		ls[i] = e.New(t, &sqllock.Options{Table: table})
	}
	pruner := e.New(t, &sqllock.Options{Table: table})

	var mu sync.Mutex
	fences := map[string][]uint64{} // per key, in the order of acquisition
	var pruned int64
	stop := make(chan struct{})
	pruneErr := make(chan error, 1)
	go func() {
		var err error
		defer func() { pruneErr <- err }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			var n int64
			if n, err = pruner.Prune(t.Context(), 0); err != nil {
				return
			}
			mu.Lock()
			pruned += n
			mu.Unlock()
		}
	}()
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for i, l := range ls {
		wg.Go(func() {
			for n := 0; n < turns; {
				key := keys[mrand.IntN(len(keys))]
				lease, err := l.TryLock(t.Context(), key, time.Minute)
				if err != nil {
					if errors.Is(err, distlock.ErrLocked) {
						time.Sleep(time.Millisecond) // pacing the attempts
						continue
					}
					errs[i] = err
					return
				}
				mu.Lock() // while holding the key: the order of acquisitions
				fences[key] = append(fences[key], lease.Fence)
				mu.Unlock()
				if errs[i] = l.Unlock(t.Context(), lease); errs[i] != nil {
					return
				}
				n++
			}
		})
	}
	wg.Wait()
	close(stop)
	require.NoError(t, <-pruneErr, "Prune")
	require.NoError(t, errors.Join(errs...))
	for key, fs := range fences {
		for i := 1; i < len(fs); i++ {
			require.Greater(t, fs[i], fs[i-1], "key %s: fences %v", key, fs)
		}
	}
	t.Logf("%d acquisitions, %d rows pruned meanwhile", clients*turns, pruned)
	require.Positive(t, pruned, "Prune deleted nothing while the keys were free at times")
}
