package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// queued waits until g has n ops queued.
func queued(t *testing.T, g *gate, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		return g.batch.Queued() == n
	}, 10*time.Second, time.Millisecond)
}

// TestGate: the ops queued while a batch runs form the next batch, in one
// transaction; an op whose statement fails gets its error and the ops after it
// errNotRun (the ones before commit); a caller whose context ends before its op
// ran gets errNotRun and the op never runs, and the leading passes on.
func TestGate(t *testing.T) {
	db := newDB(t, filepath.Join(t.TempDir(), "gate.db"))
	_, err := db.Exec(`CREATE TABLE t (v INTEGER PRIMARY KEY)`)
	require.NoError(t, err)
	g := newGate(db)
	insert := func(v int) func(context.Context, *sql.Conn) error {
		return func(ctx context.Context, c *sql.Conn) error {
			_, err := c.ExecContext(ctx, `INSERT INTO t VALUES (?)`, v)
			return err
		}
	}
	block, started := make(chan struct{}), make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		errs <- g.do(t.Context(), func(ctx context.Context, c *sql.Conn) error {
			close(started)
			<-block
			return insert(1)(ctx, c)
		})
	}()
	<-started
	res := make([]chan error, 4)
	run := func(i int, ctx context.Context, f func(context.Context, *sql.Conn) error) {
		res[i] = make(chan error, 1)
		go func() { res[i] <- g.do(ctx, f) }()
		queued(t, g, i+1)
	}
	leaving, leave := context.WithCancel(t.Context())
	run(0, leaving, insert(10)) // leaves before it runs
	run(1, t.Context(), insert(2))
	run(2, t.Context(), insert(1)) // a duplicate: fails
	run(3, t.Context(), insert(3)) // after the failure: not run
	leave()
	require.ErrorIs(t, <-res[0], errNotRun)
	close(block)
	require.NoError(t, <-errs)
	require.NoError(t, <-res[1])
	err = <-res[2]
	require.Error(t, err)
	require.NotErrorIs(t, err, errNotRun)
	require.ErrorIs(t, <-res[3], errNotRun)
	var vs []int
	rows, err := db.Query(`SELECT v FROM t ORDER BY v`)
	require.NoError(t, err)
	for rows.Next() {
		var v int
		require.NoError(t, rows.Scan(&v))
		vs = append(vs, v)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []int{1, 2}, vs)
	require.NoError(t, g.do(t.Context(), insert(4))) // the gate still runs
	g.wg.Wait()                                      // its goroutines end with the queue
}

// TestGateOwnDeadlines: every caller of the gate returns by its own context, while
// the statements of the group commit it is in are stuck (another process holds the
// file's write lock, a slow disk): the caller that started the gate, whose
// statement has started, with its context's error (the outcome is unknown); a
// caller in a group commit whose statement has not started yet, with errNotRun
// (its statement never runs); a queued caller, with errNotRun. "By" allows 250ms
// after the deadline, for the scheduler of a loaded machine under -race: the
// return itself is a timer and a wakeup, while the statements stay stuck for
// seconds.
func TestGateOwnDeadlines(t *testing.T) {
	db := newDB(t, filepath.Join(t.TempDir(), "gate.db"))
	_, err := db.Exec(`CREATE TABLE t (v INTEGER PRIMARY KEY)`)
	require.NoError(t, err)
	g := newGate(db)
	insert := func(v int, started, block chan struct{}) func(context.Context, *sql.Conn) error {
		return func(ctx context.Context, c *sql.Conn) error {
			if started != nil {
				close(started)
			}
			if block != nil {
				<-block // stuck, whatever ctx says
			}
			_, err := c.ExecContext(ctx, `INSERT INTO t VALUES (?)`, v)
			return err
		}
	}
	const deadline, bound = 200 * time.Millisecond, 250 * time.Millisecond
	type res struct {
		err  error
		took time.Duration
	}
	call := func(ctx context.Context, f func(context.Context, *sql.Conn) error) chan res {
		ch := make(chan res, 1)
		go func() {
			start := time.Now()
			err := g.do(ctx, f)
			ch <- res{err, time.Since(start)}
		}()
		return ch
	}
	within := func(name string, ch chan res) res {
		t.Helper()
		select {
		case r := <-ch:
			require.LessOrEqual(t, r.took, deadline+bound, "%s returned %v after its call, its deadline was %v", name, r.took, deadline)
			return r
		case <-time.After(5 * time.Second):
			require.FailNow(t, name+" did not return within 5s of its deadline: it waits for a statement it does not need")
			return res{}
		}
	}
	started1, block1 := make(chan struct{}), make(chan struct{})
	started2, block2 := make(chan struct{}), make(chan struct{})
	defer func() { // let the stuck statements go on any failure, then wait for the gate
		for _, b := range []chan struct{}{block1, block2} {
			select {
			case <-b:
			default:
				close(b)
			}
		}
		g.wg.Wait()
	}()
	ctx1, cancel1 := context.WithTimeout(t.Context(), deadline)
	defer cancel1()
	r1 := call(ctx1, insert(1, started1, block1)) // alone: started, then stuck
	<-started1
	r2 := call(t.Context(), insert(2, started2, block2)) // the next group commit: stuck
	queued(t, g, 1)
	ran3 := make(chan struct{})
	ctx3, cancel3 := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel3()
	r3 := call(ctx3, insert(3, ran3, nil)) // in it, after 2
	queued(t, g, 2)

	r := within("the caller whose statement is stuck", r1)
	require.ErrorIs(t, r.err, context.DeadlineExceeded)
	require.NotErrorIs(t, r.err, errNotRun, "its statement had started: the outcome is unknown")

	close(block1) // group commit 1 commits; 2 and 3 form the next one, stuck in 2
	<-started2
	ctx4, cancel4 := context.WithTimeout(t.Context(), deadline)
	defer cancel4()
	r4 := call(ctx4, insert(4, nil, nil)) // queued behind it
	cancel3()                             // 3 gives up before its statement started
	r = <-r3
	require.ErrorIs(t, r.err, context.Canceled)
	require.ErrorIs(t, r.err, errNotRun)
	r = within("a queued caller", r4)
	require.ErrorIs(t, r.err, errNotRun)

	close(block2)
	require.NoError(t, (<-r2).err)
	select {
	case <-ran3:
		t.Fatal("the statement of a caller who gave up before it started ran")
	default:
	}
	var vs []int
	rows, err := db.Query(`SELECT v FROM t ORDER BY v`)
	require.NoError(t, err)
	for rows.Next() {
		var v int
		require.NoError(t, rows.Scan(&v))
		vs = append(vs, v)
	}
	require.NoError(t, rows.Err())
	// 1's only caller had given up: its group commit was interrupted, rolled back.
	require.Equal(t, []int{2}, vs)
}
