package sqlite

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild()) // a child process of the process tests
	}
	goleak.VerifyTestMain(m)
}

// dsn is how the tests open a SQLite file.
func dsn(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(10000)"
}

// newDB opens the SQLite file at path, closed when t ends.
func newDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(path))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// newClient returns a Locker on a database handle of its own to the file at path,
// and the Locker as a conformance client whose Crash closes that handle (SQLite has
// no server to partition, delay, pause or restart). The Locker is closed, then the
// handle, when t ends.
func newClient(t testing.TB, path string, opts *sqllock.Options) (*Locker, conformance.Client) {
	t.Helper()
	db := newDB(t, path)
	l, err := New(sqltest.OpCtx(t), db, opts)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l, conformance.Client{Locker: l, Crash: func() { _ = db.Close() }}
}

func TestConformance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	conformance.Run(t, conformance.Harness{
		NewClient: func(t testing.TB) conformance.Client {
			_, c := newClient(t, path, &sqllock.Options{Table: "conformance"})
			return c
		},
		Caps: conformance.Capabilities{MaxKeyLen: sqllock.MaxKeyLen},
	})
}
