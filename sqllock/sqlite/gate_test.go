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
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.queue) == n
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
	g := &gate{db: db}
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
	require.NoError(t, g.do(t.Context(), insert(4))) // the leading was handed back
	require.False(t, g.leading)
}
