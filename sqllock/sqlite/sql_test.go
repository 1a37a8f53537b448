package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/distlock/distlock/sqllock/sqldialect"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
	"github.com/stretchr/testify/require"
)

func TestSQL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	admin := newDB(t, path)
	sqltest.Run(t, sqltest.Env{
		Backend: backend,
		New: func(t *testing.T, opts *sqllock.Options) sqltest.Locker {
			l, _ := newClient(t, path, opts)
			return l
		},
		Constructor: func(t *testing.T) func(*sqllock.Options) (sqltest.Locker, error) {
			db := newDB(t, path)
			return func(opts *sqllock.Options) (sqltest.Locker, error) {
				l, err := New(context.Background(), db, opts)
				if err != nil {
					return nil, err
				}
				return l, nil
			}
		},
		NilHandle: func(ctx context.Context) error {
			_, err := New(ctx, nil, nil)
			return err
		},
		Exec: func(t *testing.T, q string, args ...any) {
			t.Helper()
			_, err := admin.ExecContext(sqltest.OpCtx(t), q, args...)
			require.NoError(t, err, q)
		},
		DDL:    DDL,
		Schema: "main",
		InsertExpired: func(table string) string {
			return "INSERT INTO " + sqldialect.QuoteTable(table, '"') + " VALUES (?, ?, ?, ?, 0, 'x')"
		},
		MultiStatement: true,
	})
}

// TestNeedsBusyTimeout: New refuses a database without a busy timeout.
func TestNeedsBusyTimeout(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "x.db"))
	require.NoError(t, err)
	defer db.Close()
	_, err = New(sqltest.OpCtx(t), db, nil)
	require.ErrorIs(t, err, distlock.ErrInvalid)
	require.Contains(t, err.Error(), "busy_timeout")
	var oe *distlock.OpError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "New", oe.Op)
}
