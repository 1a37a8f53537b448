// Package mysql keeps distlock leases as rows of an InnoDB table in MySQL (8.0 or
// later) or MariaDB (10.5 or later), through a *sql.DB of the driver
// github.com/go-sql-driver/mysql, which it imports (registering the driver
// "mysql"). It imports no other database driver.
//
//	db, err := sql.Open("mysql", "user:password@tcp(host:3306)/db?interpolateParams=true")
//	...
//	defer db.Close()
//	db.SetMaxIdleConns(20) // as many as the goroutines that lock at once
//	locker, err := mysql.New(ctx, db, nil) // table distlock_leases, created if missing
//	...
//	defer locker.Close()
//
// The table, its statements, Prune and the cleanup of abandoned acquires are
// described in package sqllock; DDL returns this dialect's CREATE TABLE, for
// schemas managed by migrations (with sqllock.Options.SkipCreateTable). The
// Locker's Wait polls: the Waits of a key on one Locker share one reader of the
// key's row, which wakes them one at a time (see sqllock.Locker.Wait), so that
// distlock.Lock's waiters do not each poll the database.
//
// Renews that come while one is in flight (distlock.Hold of many leases) run as one
// batch of up to 1,000 (see sqldialect.BatchRenewer): MySQL has no UPDATE ...
// RETURNING, so a batch is one transaction of an UPDATE of its rows and a SELECT
// of the rows renewed, both against one reading of UTC_TIMESTAMP(6) (five
// statements with BEGIN and COMMIT), and each Renew still gets its own row's
// exact result.
//
// Keep as many idle connections as the goroutines that call the Locker at once
// (db.SetMaxIdleConns): with database/sql's default of 2, concurrent calls close
// and reopen connections all the time, and each new connection costs a TCP and
// authentication handshake plus the Locker's CONNECTION_ID() round trip.
//
// # Abandoned acquires
//
// The Locker names each connection's session by CONNECTION_ID() (asked once per
// connection) and ends the session of an acquire whose outcome is unknown with KILL
// CONNECTION (a user may kill its own connections), then waits until the process
// list no longer shows it.
//
// # Safety assumptions
//
//   - The database's clock runs at the clients' rate and does not jump: a step
//     forward (a manual change, an NTP step, a failover to a host whose clock is
//     ahead) expires every lease early, and another client may acquire a key
//     whose holder's Expires is still ahead; expiry uses UTC_TIMESTAMP(6), so
//     client clocks and session time zones do not matter.
//   - Each statement reaches the primary and decides on the latest version of the
//     row: a read replica rejects the writes, and a proxy that splits reads may
//     answer Inspect from a stale replica; any isolation level works (a deadlock
//     is retried).
//   - Committed transactions survive a crash: with innodb_flush_log_at_trx_commit
//     other than 1 a crash can lose the last acquisitions and renewals, so a lease
//     its holder believes held is gone and a fence can repeat; set it to 1.
//   - A failover keeps what the old primary committed: with asynchronous
//     replication a promoted replica may lack the latest acquisitions and
//     renewals (two holders, a repeated fence); use semi-synchronous or group
//     replication, or treat a failover as losing every lease.
//   - Connection ids name one client's connection: a proxy that multiplexes server
//     connections among clients (ProxySQL) makes CONNECTION_ID() name a connection
//     that may serve another client when an abandoned acquire is cleaned up, and
//     KILL would end that client's connection; turn multiplexing off for the
//     Locker's user.
//   - Every process that uses the table runs a version of this package with Prune
//     when Prune runs: an older one starts a pruned key's new row at fence 1.
package mysql
