package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock"
)

// backend is the Backend of the Locker's errors.
const backend = "sqllock/mysql"

// A Locker keeps leases as rows of an InnoDB table in MySQL or MariaDB. It
// implements distlock.Locker, distlock.Inspector and distlock.Waiter (its Waits
// of a key share one poller: see sqllock.Locker.Wait), and is safe for concurrent
// use. Its methods are sqllock.Locker's: see there for their contracts. The zero
// value is not usable; call New, and Close when done.
type Locker struct {
	*sqllock.Locker
}

var (
	_ distlock.Locker    = (*Locker)(nil)
	_ distlock.Inspector = (*Locker)(nil)
	_ distlock.Waiter    = (*Locker)(nil)
)

// New returns a Locker whose leases are rows of an InnoDB table in the MySQL (8.0
// or later) or MariaDB (10.5 or later) database that db connects to with the
// driver github.com/go-sql-driver/mysql (which this package imports, registering
// the driver "mysql"). The DSN must name a database; interpolateParams=true saves
// a round trip per call, and db.SetMaxIdleConns(n), for n the goroutines that call
// the Locker at once, saves reconnecting (database/sql keeps 2 by default). New
// creates the table if it is missing (unless Options.SkipCreateTable) and adds the
// table's fence high-water row if it is missing, with ctx. db stays the caller's: close it after the Locker. A nil db
// or invalid opts is the returned error, an *distlock.OpError wrapping
// distlock.ErrInvalid that names the bad value.
//
// Acquire is an UPDATE that takes the key's row over when it has expired by the
// database's UTC_TIMESTAMP(6) (so the sessions' time zones do not matter), and,
// when that changed no row (a new key, or a held one), one INSERT ... ON
// DUPLICATE KEY UPDATE statement that inserts the row or takes it over only when
// it has expired; each reports the new fence through LAST_INSERT_ID(expr), which
// does not depend on the DSN's clientFoundRows.
func New(ctx context.Context, db *sql.DB, opts *sqllock.Options) (*Locker, error) {
	if db == nil {
		return nil, newError(fmt.Errorf("%w: nil *sql.DB", distlock.ErrInvalid))
	}
	o, err := opts.WithDefaults()
	if err != nil {
		return nil, newError(err)
	}
	d := &dialect{db: db, owner: o.Owner, sql: newStatements(o.Table)}
	if err := d.setup(ctx, o.SkipCreateTable); err != nil {
		return nil, newError(fmt.Errorf("table %s: %w", o.Table, err))
	}
	core, err := sqllock.NewLocker(backend, d, &o)
	if err != nil {
		return nil, err
	}
	return &Locker{core}, nil
}

func newError(err error) error {
	return &distlock.OpError{Backend: backend, Op: "New", Err: err}
}

// DDL returns the statements that create the lease table named table (empty:
// sqllock.DefaultTable) and its fence high-water row, separated by semicolons, for
// schemas managed by migrations (then set Options.SkipCreateTable). A table name
// that sqllock.Options rejects is an *distlock.OpError wrapping
// distlock.ErrInvalid. For the default table:
//
//	CREATE TABLE IF NOT EXISTS `distlock_leases` (
//		key_hash BINARY(32) NOT NULL PRIMARY KEY,
//		lock_key MEDIUMBLOB NOT NULL,
//		token VARBINARY(255) NOT NULL,
//		fence BIGINT NOT NULL,
//		expires_at DATETIME(6) NOT NULL,
//		owner VARCHAR(255) CHARACTER SET utf8mb4 NOT NULL
//	) ENGINE=InnoDB;
//	INSERT INTO `distlock_leases` (key_hash, lock_key, token, fence, expires_at, owner)
//	VALUES (X'0000000000000000000000000000000000000000000000000000000000000000', '', '', 0, '1970-01-01 00:00:00', 'distlock: fence high-water mark')
//	ON DUPLICATE KEY UPDATE key_hash = key_hash;
func DDL(table string) (string, error) {
	o, err := (&sqllock.Options{Table: table}).WithDefaults()
	if err != nil {
		return "", &distlock.OpError{Backend: backend, Op: "DDL", Err: err}
	}
	return strings.Join(newStatements(o.Table).ddl(), ";\n") + ";\n", nil
}
