package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// countedLocker returns a Locker on a pool of at most conns connections whose
// statements stmts counts.
func countedLocker(t *testing.T, table string, conns int32, stmts *counter) (*Locker, *pgxpool.Pool) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgSrv.URL)
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = stmts
	cfg.MaxConns = conns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	l, err := New(sqltest.OpCtx(t), pool, &sqllock.Options{Table: table})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l, pool
}

// TestBatchStatements: 16 goroutines that share a Locker, each taking and
// releasing a key of its own, share round trips: the TryLocks that come while the
// Locker's acquire round trips are in flight go together as one, and so do the
// Unlocks while its release round trips are, so that a pair costs well under the
// 2 round trips of a lone caller. One connection makes the queues certain.
func TestBatchStatements(t *testing.T) {
	const goroutines, pairs = 16, 40
	var stmts counter
	l, _ := countedLocker(t, "batch_stmts", 1, &stmts)
	prefix := "batch-stmts-" + driver.NewToken()[:8] + "-"
	run := func(n int) {
		var wg sync.WaitGroup
		for g := range goroutines {
			key := prefix + fmt.Sprint(g)
			wg.Go(func() {
				for range n {
					lease, err := l.TryLock(sqltest.OpCtx(t), key, time.Minute)
					if !assertNoError(t, err) {
						return
					}
					assertNoError(t, l.Unlock(sqltest.OpCtx(t), lease))
				}
			})
		}
		wg.Wait()
	}
	run(1) // the rows exist, the session is named
	before := stmts.n.Load()
	run(pairs)
	sent := stmts.n.Load() - before
	perPair := float64(sent) / float64(goroutines*pairs)
	t.Logf("%d round trips for %d pairs: %.2f a pair", sent, goroutines*pairs, perPair)
	require.Less(t, perPair, 1.0, "round trips per TryLock+Unlock pair of 16 concurrent callers")
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

// TestBatchExclusion: callers of two Lockers (so that batches of both run at
// once) contend for a few keys: no two leases of a key overlap, each
// acquisition's fence is above every earlier one of its key, and every Unlock of
// a lease still held succeeds.
func TestBatchExclusion(t *testing.T) {
	const keys, perKey, rounds = 4, 8, 30
	var stmts counter
	ls := []*Locker{}
	for range 2 {
		l, _ := countedLocker(t, "batch_excl", 2, &stmts)
		ls = append(ls, l)
	}
	prefix := "batch-excl-" + driver.NewToken()[:8] + "-"
	type keyState struct {
		mu    sync.Mutex
		held  bool
		fence uint64
		won   int
	}
	states := make([]*keyState, keys)
	for i := range states {
		states[i] = &keyState{}
	}
	var wg sync.WaitGroup
	var locked atomic.Int64
	for k := range keys {
		for c := range perKey {
			l := ls[c%len(ls)]
			key, st := prefix+fmt.Sprint(k), states[k]
			wg.Go(func() {
				for range rounds {
					lease, err := l.TryLock(sqltest.OpCtx(t), key, time.Minute)
					if errors.Is(err, distlock.ErrLocked) {
						locked.Add(1)
						continue
					}
					if !assertNoError(t, err) {
						return
					}
					st.mu.Lock()
					if st.held {
						t.Errorf("key %s: two leases at once (fence %d)", key, lease.Fence)
					}
					if lease.Fence <= st.fence {
						t.Errorf("key %s: fence %d after %d", key, lease.Fence, st.fence)
					}
					st.held, st.fence = true, lease.Fence
					st.won++
					st.mu.Unlock()

					st.mu.Lock()
					st.held = false
					st.mu.Unlock()
					// Released in the test's books first: the next lease may come
					// as soon as the row is.
					assertNoError(t, l.Unlock(sqltest.OpCtx(t), lease))
				}
			})
		}
	}
	wg.Wait()
	for k, st := range states {
		require.Positive(t, st.won, "key %d was never acquired", k)
	}
	require.Positive(t, locked.Load(), "no TryLock found a key held: no contention")
}

// TestBatchCallerLeaves: a TryLock whose context ends while its batch waits for a
// row returns at once, with an error that is not ErrLocked; the batch goes on for
// the other callers, who get their leases; the row the leaver's statement took is
// released soon after (by the cleanup, which waited for the batch), not at its
// ttl.
func TestBatchCallerLeaves(t *testing.T) {
	var stmts counter
	l, _ := countedLocker(t, "batch_leave", 4, &stmts)
	l.d.acquires = l.d.newAcquires(1, time.Hour) // one statement in flight: the others queue
	admin := newPool(t, "")
	prefix := "batch-leave-" + driver.NewToken()[:8] + "-"
	first, c, d, e := prefix+"first", prefix+"c", prefix+"d", prefix+"e"
	makeRows(t, l, first, c, d, e)
	commitFirst := lockRows(t, admin, "batch_leave", first)
	commitRest := lockRows(t, admin, "batch_leave", c, d, e)

	type result struct {
		lease distlock.Lease
		err   error
	}
	try := func(ctx context.Context, key string) chan result {
		ch := make(chan result, 1)
		go func() {
			lease, err := l.TryLock(ctx, key, time.Hour)
			ch <- result{lease, err}
		}()
		return ch
	}
	waiting := func(query string, n int) func() bool { return lockWaits(t, admin, query, n) }
	firstDone := try(sqltest.OpCtx(t), first)
	require.Eventually(t, waiting("WITH u AS%", 1), 10*time.Second, 5*time.Millisecond) // alone
	cctx, cancel := context.WithCancel(sqltest.OpCtx(t))
	defer cancel()
	cDone := try(cctx, c)
	dDone, eDone := try(sqltest.OpCtx(t), d), try(sqltest.OpCtx(t), e)
	require.Eventually(t, func() bool { return l.d.acquires.Queued() == 3 }, 10*time.Second, time.Millisecond)
	commitFirst()
	r := <-firstDone
	require.NoError(t, r.err)
	// The batch of 3: first's statement has ended, so that the one waiting is the
	// batch's first.
	require.Eventually(t, waiting("WITH u AS%", 1), 10*time.Second, 5*time.Millisecond)

	cancel()
	select {
	case r := <-cDone:
		require.Error(t, r.err)
		require.NotErrorIs(t, r.err, distlock.ErrLocked)
		require.ErrorIs(t, r.err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("TryLock did not return when its context ended")
	}
	commitRest()
	for _, ch := range []chan result{dDone, eDone} {
		r := <-ch
		require.NoError(t, r.err)
		require.NoError(t, l.Unlock(sqltest.OpCtx(t), r.lease))
	}
	// The batch took c's row for the caller who left; the cleanup releases it.
	require.Eventually(t, func() bool {
		_, err := l.Inspect(sqltest.OpCtx(t), c)
		return errors.Is(err, distlock.ErrNotHeld)
	}, 10*time.Second, 10*time.Millisecond)
	lease, err := l.TryLock(sqltest.OpCtx(t), c, time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(sqltest.OpCtx(t), lease))
	require.NoError(t, l.Unlock(sqltest.OpCtx(t), r.lease))
}

// TestBatchStall: a TryLock whose statement waits for a row (locked by a long
// transaction) holds up the Locker's other TryLocks only for stallAfter: they
// then go without it.
func TestBatchStall(t *testing.T) {
	var stmts counter
	l, _ := countedLocker(t, "batch_stall", 4, &stmts)
	admin := newPool(t, "")
	prefix := "batch-stall-" + driver.NewToken()[:8] + "-"
	stuck, other := prefix+"stuck", prefix+"other"
	makeRows(t, l, stuck, other)
	commitStuck := lockRows(t, admin, "batch_stall", stuck)

	stuckDone := make(chan error, 1)
	go func() {
		lease, err := l.TryLock(sqltest.OpCtx(t), stuck, time.Minute)
		if err == nil {
			err = l.Unlock(sqltest.OpCtx(t), lease)
		}
		stuckDone <- err
	}()
	require.Eventually(t, lockWaits(t, admin, "WITH u AS%", 1), 10*time.Second, 5*time.Millisecond)

	ctx, cancel := context.WithTimeout(sqltest.OpCtx(t), 5*time.Second)
	defer cancel()
	for range 3 {
		lease, err := l.TryLock(ctx, other, time.Minute)
		require.NoError(t, err, "a TryLock of another key behind one that waits for its row")
		require.NoError(t, l.Unlock(ctx, lease))
	}
	select {
	case err := <-stuckDone:
		t.Fatalf("the TryLock of the locked row returned before its row was free: %v", err)
	default:
	}
	commitStuck()
	require.NoError(t, <-stuckDone)
}

// TestUnlockNotQueued: an Unlock never waits for the TryLocks in flight: with
// the Locker's one round trip taken by a TryLock that waits for its row, and
// other TryLocks queued behind it, an Unlock returns at once; the queued TryLocks
// of its key then go as one batch, in which one gets the key, with the next
// fence, and the other finds it held.
func TestUnlockNotQueued(t *testing.T) {
	var stmts counter
	l, _ := countedLocker(t, "batch_mixed", 4, &stmts)
	l.d.acquires = l.d.newAcquires(1, time.Hour) // one round trip in flight: the others queue
	admin := newPool(t, "")
	prefix := "batch-mixed-" + driver.NewToken()[:8] + "-"
	stuck, held := prefix+"stuck", prefix+"held"
	makeRows(t, l, stuck, held)
	heldLease, err := l.TryLock(sqltest.OpCtx(t), held, time.Minute)
	require.NoError(t, err)
	commitStuck := lockRows(t, admin, "batch_mixed", stuck)

	type result struct {
		lease distlock.Lease
		err   error
	}
	try := func(key string) chan result {
		ch := make(chan result, 1)
		go func() {
			lease, err := l.TryLock(sqltest.OpCtx(t), key, time.Minute)
			ch <- result{lease, err}
		}()
		return ch
	}
	stuckDone := try(stuck)
	require.Eventually(t, lockWaits(t, admin, "WITH u AS%", 1), 10*time.Second, 5*time.Millisecond)
	heldDone := []chan result{try(held), try(held)}
	require.Eventually(t, func() bool { return l.d.acquires.Queued() == 2 }, 10*time.Second, time.Millisecond)
	require.NoError(t, l.Unlock(sqltest.OpCtx(t), heldLease), "an Unlock while a TryLock waits for its row")
	before := stmts.n.Load()
	commitStuck()

	r := <-stuckDone
	require.NoError(t, r.err)
	leases := []distlock.Lease{r.lease}
	won := 0
	for _, ch := range heldDone {
		r := <-ch
		if errors.Is(r.err, distlock.ErrLocked) {
			continue
		}
		require.NoError(t, r.err)
		require.Equal(t, heldLease.Fence+1, r.lease.Fence)
		leases = append(leases, r.lease)
		won++
	}
	require.Equal(t, 1, won, "TryLocks of the key after its Unlock")
	require.Equal(t, int64(1), stmts.n.Load()-before, "round trips of the 2 queued TryLocks")
	for _, lease := range leases {
		require.NoError(t, l.Unlock(sqltest.OpCtx(t), lease))
	}
}

// TestReleaseBatch: the Unlocks that come while the Locker's release round trip
// is in flight (here one that waits for its row) go together as one round trip;
// each gets its own statement's result: of two Unlocks of one lease, one releases
// it and the other finds it not held.
func TestReleaseBatch(t *testing.T) {
	var stmts counter
	l, _ := countedLocker(t, "release_batch", 4, &stmts)
	l.d.releases = l.d.newReleases(1, time.Hour) // one round trip in flight: the others queue
	admin := newPool(t, "")
	prefix := "release-batch-" + driver.NewToken()[:8] + "-"
	stuck, a, b := prefix+"stuck", prefix+"a", prefix+"b"
	makeRows(t, l, stuck, a, b)
	leases := make(map[string]distlock.Lease)
	for _, k := range []string{stuck, a, b} {
		lease, err := l.TryLock(sqltest.OpCtx(t), k, time.Minute)
		require.NoError(t, err)
		leases[k] = lease
	}
	commitStuck := lockRows(t, admin, "release_batch", stuck)
	unlock := func(k string) chan error {
		ch := make(chan error, 1)
		go func() { ch <- l.Unlock(sqltest.OpCtx(t), leases[k]) }()
		return ch
	}
	stuckDone := unlock(stuck)
	require.Eventually(t, lockWaits(t, admin, "UPDATE %", 1), 10*time.Second, 5*time.Millisecond)
	before := stmts.n.Load()
	queued := []chan error{unlock(a), unlock(a), unlock(b)}
	require.Eventually(t, func() bool { return l.d.releases.Queued() == 3 }, 10*time.Second, time.Millisecond)
	commitStuck()

	require.NoError(t, <-stuckDone)
	errA1, errA2 := <-queued[0], <-queued[1]
	if errA1 != nil {
		errA1, errA2 = errA2, errA1
	}
	require.NoError(t, errA1)
	require.ErrorIs(t, errA2, distlock.ErrNotHeld, "the second Unlock of one lease")
	require.NoError(t, <-queued[2])
	require.Equal(t, int64(1), stmts.n.Load()-before, "round trips of the 3 queued Unlocks")
	for _, k := range []string{stuck, a, b} {
		_, err := l.Inspect(sqltest.OpCtx(t), k)
		require.ErrorIs(t, err, distlock.ErrNotHeld, "key %s after its Unlock", k)
	}
}

// TestBatchAllLeave: when every caller of a batch has left (their contexts
// ended), the batch's statement is cancelled rather than left waiting for its
// rows, and what it may have taken is released: the keys are free once the rows
// are.
func TestBatchAllLeave(t *testing.T) {
	var stmts counter
	l, _ := countedLocker(t, "batch_all_leave", 4, &stmts)
	l.d.acquires = l.d.newAcquires(1, time.Hour) // one round trip in flight: the others queue
	admin := newPool(t, "")
	prefix := "batch-all-leave-" + driver.NewToken()[:8] + "-"
	first, c, d := prefix+"first", prefix+"c", prefix+"d"
	makeRows(t, l, first, c, d)
	waiting := func(n int) func() bool { return lockWaits(t, admin, "WITH u AS%", n) }
	commitFirst := lockRows(t, admin, "batch_all_leave", first)
	commitRest := lockRows(t, admin, "batch_all_leave", c, d)
	firstDone := make(chan error, 1)
	var firstLease distlock.Lease
	go func() {
		var err error
		firstLease, err = l.TryLock(sqltest.OpCtx(t), first, time.Minute)
		firstDone <- err
	}()
	require.Eventually(t, waiting(1), 10*time.Second, 5*time.Millisecond)
	ctx, cancel := context.WithCancel(sqltest.OpCtx(t))
	defer cancel()
	left := make(chan error, 2)
	for _, k := range []string{c, d} {
		go func() {
			_, err := l.TryLock(ctx, k, time.Minute)
			left <- err
		}()
	}
	require.Eventually(t, func() bool { return l.d.acquires.Queued() == 2 }, 10*time.Second, time.Millisecond)
	commitFirst()
	require.NoError(t, <-firstDone)
	require.Eventually(t, waiting(1), 10*time.Second, 5*time.Millisecond) // the batch of c and d

	cancel()
	for range 2 {
		err := <-left
		require.ErrorIs(t, err, context.Canceled)
	}
	// The batch's context has ended: its statement no longer waits, while the
	// rows are still locked.
	require.Eventually(t, waiting(0), 10*time.Second, 5*time.Millisecond)
	commitRest()
	for _, k := range []string{c, d} {
		require.Eventually(t, func() bool {
			lease, err := l.TryLock(sqltest.OpCtx(t), k, time.Minute)
			if err != nil {
				return false
			}
			require.NoError(t, l.Unlock(sqltest.OpCtx(t), lease))
			return true
		}, 10*time.Second, 10*time.Millisecond)
	}
	require.NoError(t, l.Unlock(sqltest.OpCtx(t), firstLease))
}

// makeRows makes the rows of keys in l's table (a TryLock and an Unlock each).
func makeRows(t *testing.T, l *Locker, keys ...string) {
	t.Helper()
	for _, k := range keys {
		lease, err := l.TryLock(sqltest.OpCtx(t), k, time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Unlock(sqltest.OpCtx(t), lease))
	}
}

// lockRows locks the rows of keys in table (FOR UPDATE) in a transaction of
// admin's, and returns the function that commits it (it rolls back at t's end).
func lockRows(t *testing.T, admin *pgxpool.Pool, table string, keys ...string) (commit func()) {
	t.Helper()
	tx, err := admin.Begin(sqltest.OpCtx(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	for _, k := range keys {
		_, err := tx.Exec(sqltest.OpCtx(t), `SELECT 1 FROM `+table+` WHERE key_hash = $1 FOR UPDATE`, row(k).Hash)
		require.NoError(t, err)
	}
	return func() { require.NoError(t, tx.Commit(sqltest.OpCtx(t))) }
}

// lockWaits reports whether n statements whose text is LIKE query wait for a lock
// (pg_stat_activity, read with admin).
func lockWaits(t *testing.T, admin *pgxpool.Pool, query string, n int) func() bool {
	return func() bool {
		var got int
		err := admin.QueryRow(sqltest.OpCtx(t), `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE $1`, query).Scan(&got)
		require.NoError(t, err)
		return got == n
	}
}
