// Package sqllock is the shared core of the SQL backends: leases kept as rows of
// one table. Applications use a dialect package, each with its own driver, so that
// importing one never links or registers another:
//
//   - sqllock/postgres: PostgreSQL 14 or later, through a pgx v5 pool; its
//     distlock.Waiter is notified (LISTEN/NOTIFY).
//   - sqllock/mysql: MySQL 8.0 or MariaDB 10.5 or later, through a *sql.DB of
//     github.com/go-sql-driver/mysql.
//   - sqllock/sqlite: an SQLite file shared by the processes of one host, through
//     a *sql.DB of modernc.org/sqlite (pure Go).
//
// Every Locker is a distlock.Waiter. A release wakes one Wait of the key per
// Locker (internal/waitq), the next one only when no TryLock follows, so that a
// herd of waiters costs a few statements per release. The Waits of mysql and
// sqlite poll (Locker.Wait): one poller per Locker and key, 1ms after the key
// changed hands, doubling to 50ms while one lease holds it: a Locker with Waits on
// a held key reads its row up to 20 times a second, whatever the number of Waits
// (distlock.Lock's backoff cost each waiter about one TryLock a second).
//
// Each has New(ctx, db, *sqllock.Options) (*Locker, error), Close, and DDL. This
// package holds what they share: Options and the Locker, which runs on package
// driver's core (validation, retries, errors, the clean-up of abandoned acquires)
// over a sqldialect.Dialect, the interface that a dialect implements (package
// sqllock/sqldialect, for dialect authors). It imports no database driver.
//
// # The table
//
// The table has one row per key:
//
//	key_hash    SHA-256 of the key: the primary key
//	lock_key    the key's bytes, compared in every statement (keys are opaque bytes,
//	            up to MaxKeyLen, NUL included; no two keys share a row)
//	token       the lease's token
//	fence       incremented by every acquisition
//	expires_at  by the database's clock
//	owner       Options.Owner, reported by Inspect
//
// and one more row, the fence high-water mark (key_hash of 32 zero bytes, an empty
// lock_key, which no key matches): a key's first row starts its fence above it.
// The constructor creates the table (CREATE TABLE IF NOT EXISTS) and adds the
// high-water row; with Options.SkipCreateTable it only adds the row, for schemas
// managed by migrations, which create the table with the statements that the
// dialect package's DDL function returns (shown in its documentation).
//
// # Statements
//
// TryLock is a single statement that inserts the row or takes it over when it has
// expired, and returns the new fence (on PostgreSQL, an UPDATE of the expired row
// that also tells a held row, then, only when the key has no row, an UPDATE and an
// INSERT in one statement; INSERT ... ON CONFLICT DO UPDATE ... WHERE expired
// RETURNING fence on SQLite; on MySQL an UPDATE of the expired row, then, when it
// changed nothing, INSERT ... ON DUPLICATE KEY UPDATE). Only a key's first row reads the high-water mark, so
// that acquires of distinct keys do not queue on that row. Renew and Unlock are
// UPDATEs conditioned on the key and the token and checked by rows affected;
// Unlock sets expires_at to the database's now, keeping the row. The Renews of a
// Locker that come while one is in flight run together as one batch of all their
// rows (every dialect is a BatchRenewer: one UPDATE on PostgreSQL and SQLite, one
// transaction on MySQL), each with its own ttl and result; each Renew still returns by its own context, and
// a statement in flight for over 100ms no longer holds up the Renews queued
// behind it. Every comparison with the clock happens in the database, so
// client clocks do not matter. Statements that the database rolls back because of
// a serialization failure or a deadlock (or a busy SQLite file) are retried a few
// times.
//
// Lease.Expires is the time taken before the statement was sent plus ttl; the row
// expires no earlier than that by the database's clock, as long as the database's
// clock runs at the client's rate. A reply that comes after ttl is an error, never
// a Lease that has already expired (TryLock then releases the row). Renew never
// moves the row's expiry earlier: it sets expires_at to the later of expires_at and
// now + ttl, so a Renew with a shorter ttl whose outcome is unknown (a lost reply)
// leaves the old Lease's Expires a valid bound.
//
// # Pruning
//
// Rows are not deleted when a lease ends, so that a key's fence never resets: a
// table whose keys change (a key per user, per job run) grows. Locker.Prune deletes
// the rows of keys that have been free for longer than a bound, after raising the
// high-water mark to their fences in the same transaction, so a pruned key that is
// acquired again still gets a larger fence than it ever had. Prune holds up
// TryLocks on the table for the length of each of its transactions (1000 rows at
// most); run it now and then, from one process.
//
// # Abandoned acquires
//
// When TryLock's outcome is unknown (its context ended, the connection broke), its
// statement may have committed, or may not have reached the database yet: held up
// in a socket buffer or the network, it can arrive after the driver closed the
// connection, and the database runs what it reads before the close. A cleanup that
// looks for the token's row once cannot see such a statement, which would then hold
// the key, under a token nobody has, for its full ttl. So the Locker ends the
// statement's database session first, and waits until it is gone, before it
// releases the row: a session that is gone has committed or rolled back all it ever
// will, and bytes that reach its closed socket later are discarded. This runs in
// the background, with fresh contexts (Options.EndSessionTimeout to end the
// session, then Options.CleanupTimeout to release); Close waits for it.
//
// To name the session before the statement is sent, the Locker asks each new
// connection once for its identity and keeps it with the connection; the happy
// path costs no extra round trip. The dialect packages say how they end a session
// and when they cannot (a pooler in between, missing privileges). When the session
// cannot be named or ended, the Locker still releases the row, and a statement
// that reaches the database later can hold the key until its ttl ends: this delays
// other clients but never gives the key to two holders.
//
// # Safety assumptions
//
// A lease is exactly as safe as the database that keeps its row; each dialect
// package lists what it assumes of its database (clock, transactions, durability,
// replication and failover, poolers).
package sqllock
