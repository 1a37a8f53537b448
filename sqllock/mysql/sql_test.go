package mysql

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock/sqllock/sqldialect"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/faultproxy"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

func TestSQL(t *testing.T) {
	admin := newDB(t, "", nil)
	sqltest.Run(t, sqltest.Env{
		Backend: backend,
		New: func(t *testing.T, opts *sqllock.Options) sqltest.Locker {
			return newLocker(t, "", opts)
		},
		Constructor: func(t *testing.T) func(*sqllock.Options) (sqltest.Locker, error) {
			db := newDB(t, "", nil)
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
		Schema: "distlock", // the test database (testenv.MariaDBDatabase)
		InsertExpired: func(table string) string {
			return "INSERT INTO " + sqldialect.QuoteTable(table, '`') + " VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, 'x')"
		},
	})
}

func TestAbandonedAcquire(t *testing.T) {
	sqltest.AbandonedAcquire(t, mySrv.Addr(), func(t *testing.T, addr string) sqltest.Locker {
		return newLocker(t, addr, &sqllock.Options{Table: "abandon"})
	})
}

func TestRenewShorterLostReply(t *testing.T) {
	admin := newDB(t, "", nil)
	sqltest.RenewShorterLostReply(t,
		func(t *testing.T, opts *sqllock.Options) (sqltest.Locker, *faultproxy.Proxy) {
			l, p, _ := newClient(t, opts)
			return l, p
		},
		func(t *testing.T, _ string) func() int64 {
			return func() int64 {
				var name string
				var n int64 // the test's server runs no other UPDATE meanwhile
				err := admin.QueryRowContext(sqltest.OpCtx(t), `SHOW GLOBAL STATUS LIKE 'Com_update'`).Scan(&name, &n)
				require.NoError(t, err)
				return n
			}
		})
}

// TestFoundRows: the acquire outcome does not depend on the DSN's clientFoundRows
// (which changes what rows affected means).
func TestFoundRows(t *testing.T) {
	for _, found := range []bool{false, true} {
		db := newDB(t, "", func(c *gomysql.Config) { c.ClientFoundRows = found })
		l, err := New(sqltest.OpCtx(t), db, &sqllock.Options{Table: "foundrows"})
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
		key := sqltest.Key("found")
		la, err := l.TryLock(sqltest.OpCtx(t), key, 200*time.Millisecond)
		require.NoError(t, err, "clientFoundRows=%v: first TryLock", found)
		_, err = l.TryLock(sqltest.OpCtx(t), key, time.Minute)
		require.ErrorIs(t, err, distlock.ErrLocked, "clientFoundRows=%v: TryLock of a held key", found)
		// Renew twice with the same ttl, then with a shorter one: each may leave
		// expires_at unchanged; either way it must succeed.
		for _, ttl := range []time.Duration{200 * time.Millisecond, 200 * time.Millisecond, time.Millisecond} {
			next, err := l.Renew(sqltest.OpCtx(t), la, ttl)
			if ttl == time.Millisecond {
				if err == nil {
					la = next
				}
				continue // may have come after its 1ms
			}
			require.NoError(t, err, "clientFoundRows=%v: Renew", found)
			la = next
		}
		var lb distlock.Lease
		require.Eventually(t, func() bool {
			lb, err = l.TryLock(sqltest.OpCtx(t), key, time.Minute)
			return err == nil
		}, 10*time.Second, 10*time.Millisecond, "TryLock after expiry: %v", err)
		require.Equal(t, la.Fence+1, lb.Fence, "clientFoundRows=%v: TryLock after expiry", found)
		require.NoError(t, l.Unlock(sqltest.OpCtx(t), lb))
	}
}
