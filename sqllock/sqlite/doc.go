// Package sqlite keeps distlock leases as rows of a table in an SQLite database
// file, through a *sql.DB of the pure-Go driver modernc.org/sqlite (no cgo), which
// it imports (registering the driver "sqlite"). It imports no other database
// driver. It is for processes on one host that share the file: SQLite's file locks
// make them exclude each other.
//
//	db, err := sql.Open("sqlite", "file:/var/lib/app/locks.db?_pragma=busy_timeout(5000)")
//	...
//	defer db.Close()
//	locker, err := sqlite.New(ctx, db, nil) // table distlock_leases, created if missing
//	...
//	defer locker.Close()
//
// The table, its statements and Prune are described in package sqllock; DDL
// returns this dialect's CREATE TABLE, for schemas managed by migrations (with
// sqllock.Options.SkipCreateTable). The Locker's Wait polls: the Waits of a key on
// one Locker share one reader of the key's row, which wakes them one at a time
// (see sqllock.Locker.Wait), so that distlock.Lock's waiters do not each poll the
// file.
//
// The writing statements of one *sql.DB run in group commits (see New): those
// that arrive while a transaction commits share the next one, and its fsync. The
// Renews that come while one is in flight (distlock.Hold of many leases) are also
// one statement, UPDATE ... FROM (VALUES ...) ... RETURNING, of up to 1,000 rows
// (see sqldialect.BatchRenewer); each Renew still gets its own row's result.
//
// An acquire whose outcome is unknown leaves nothing behind to end: the driver
// runs the statement in the calling process, and a call that returned while its
// statement was in a group commit (its context ended) is followed by the
// cleanup's release, which runs in a later group commit of the same process, so
// nothing of the acquire can reach the database after the cleanup.
//
// # Safety assumptions
//
//   - The host's clock does not jump: expiry uses SQLite's clock (the host's, in
//     milliseconds), so a step forward expires every lease early and another
//     process may acquire a key whose holder's Expires is still ahead; keep the
//     clock slewed by NTP.
//   - The file is on a local disk whose locks work: on a network file system
//     (NFS, SMB) SQLite's locks and write-ahead log may not exclude processes on
//     different hosts, or at all; use sqllock/postgres or sqllock/mysql across
//     hosts.
//   - Committed transactions survive a crash: with PRAGMA synchronous=OFF a power
//     loss can lose the last acquisitions (a fence can repeat); keep the default.
//   - The file is not replaced or restored from a copy while in use: a restored
//     file forgets the leases and fences taken since the copy.
//   - Every process that uses the table runs a version of this package with Prune
//     when Prune runs: an older one starts a pruned key's new row at fence 1.
package sqlite
