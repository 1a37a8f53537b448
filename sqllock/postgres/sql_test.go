package postgres

import (
	"context"
	"testing"

	"github.com/distlock/distlock/sqllock/sqldialect"

	"github.com/distlock/distlock/faultproxy"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
	"github.com/stretchr/testify/require"
)

func TestSQL(t *testing.T) {
	admin := newPool(t, "")
	exec := func(t *testing.T, q string, args ...any) {
		t.Helper()
		_, err := admin.Exec(sqltest.OpCtx(t), q, args...)
		require.NoError(t, err, q)
	}
	exec(t, `CREATE SCHEMA IF NOT EXISTS app`)
	sqltest.Run(t, sqltest.Env{
		Backend: backend,
		New: func(t *testing.T, opts *sqllock.Options) sqltest.Locker {
			return newLocker(t, "", opts)
		},
		Constructor: func(t *testing.T) func(*sqllock.Options) (sqltest.Locker, error) {
			pool := newPool(t, "")
			return func(opts *sqllock.Options) (sqltest.Locker, error) {
				l, err := New(context.Background(), pool, opts)
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
		Exec:   exec,
		DDL:    DDL,
		Schema: "app",
		InsertExpired: func(table string) string {
			return `INSERT INTO ` + sqldialect.QuoteTable(table, '"') + ` VALUES ($1, $2, $3, $4, now() - interval '1 hour', 'x')`
		},
		MultiStatement: true,
	})
}

func TestAbandonedAcquire(t *testing.T) {
	sqltest.AbandonedAcquire(t, pgSrv.Addr(), func(t *testing.T, addr string) sqltest.Locker {
		return newLocker(t, addr, &sqllock.Options{Table: "abandon"})
	})
}

func TestRenewShorterLostReply(t *testing.T) {
	admin := newPool(t, "")
	sqltest.RenewShorterLostReply(t,
		func(t *testing.T, opts *sqllock.Options) (sqltest.Locker, *faultproxy.Proxy) {
			l, p, _ := newClient(t, opts)
			return l, p
		},
		func(t *testing.T, key string) func() int64 {
			kh := row(key).Hash
			return func() int64 {
				var xmin int64 // every UPDATE writes a new row version
				err := admin.QueryRow(sqltest.OpCtx(t), `SELECT xmin::text::bigint FROM renewlost WHERE key_hash = $1`, kh).Scan(&xmin)
				require.NoError(t, err)
				return xmin
			}
		})
}
