package mysql

import (
	"database/sql"
	"fmt"
	"testing"

	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

// TestRenewBatchExact: sqltest.RenewBatchExact, with and without client-side
// interpolation (prepared statements).
func TestRenewBatchExact(t *testing.T) {
	for _, interpolate := range []bool{true, false} {
		t.Run(fmt.Sprintf("interpolate=%v", interpolate), func(t *testing.T) {
			testRenewBatchExact(t, newDB(t, "", func(c *gomysql.Config) { c.InterpolateParams = interpolate }))
		})
	}
}

func testRenewBatchExact(t *testing.T, db *sql.DB) {
	l, err := New(sqltest.OpCtx(t), db, &sqllock.Options{Table: "renew_batch"})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	sqltest.RenewBatchExact(t, l, &dialect{db: db, sql: newStatements("renew_batch")})
}

// TestDeadlinesWhileStalled: sqltest.DeadlinesWhileStalled, the Locker's
// link through a stalled fault proxy.
func TestDeadlinesWhileStalled(t *testing.T) {
	l, p, _ := newClient(t, &sqllock.Options{Table: "renew_stall"})
	sqltest.DeadlinesWhileStalled(t, l, p.Stall, p.Heal)
}
