// Package sqllock keeps distlock leases as rows of a table in PostgreSQL (pgx v5),
// MySQL or MariaDB (go-sql-driver/mysql), or SQLite (modernc.org/sqlite, pure Go).
//
// The table has one row per key, which is never deleted, so that the key's fence
// never resets:
//
//	key_hash    SHA-256 of the key: the primary key
//	lock_key    the key's bytes, compared in every statement (keys are opaque bytes,
//	            up to MaxKeyLen, NUL included; no two keys share a row)
//	token       the lease's token
//	fence       incremented by every acquisition
//	expires_at  by the database's clock
//	owner       Options.Owner, reported by Inspect
//
// TryLock is a single statement that inserts the row or takes it over when it has
// expired, and returns the new fence (INSERT ... ON CONFLICT DO UPDATE ... WHERE
// expired RETURNING fence on PostgreSQL and SQLite; INSERT ... ON DUPLICATE KEY
// UPDATE on MySQL). Renew and Unlock are UPDATEs conditioned on the key and the token
// and checked by rows affected; Unlock sets expires_at to the database's now. Every
// comparison with the clock happens in the database, so client clocks do not matter.
// Statements that the database rolls back because of a serialization failure or a
// deadlock (or a busy SQLite file) are retried a few times.
//
// Lease.Expires is the time taken before the statement was sent plus ttl; the row
// expires no earlier than that by the database's clock, as long as the database's
// clock runs at the client's rate. Renew never moves the row's expiry earlier: it
// sets expires_at to the later of expires_at and now + ttl, so a Renew with a
// shorter ttl whose outcome is unknown (a lost reply) leaves the old Lease's Expires
// a valid bound.
//
// PostgresLocker also implements distlock.Waiter with LISTEN/NOTIFY: Unlock notifies
// in its own statement. MySQL and SQLite Lockers have no Waiter; distlock.Lock polls
// them with backoff.
//
// # Abandoned acquires
//
// When TryLock's outcome is unknown (its context ended, the connection broke), its
// statement may have committed, or may not have reached the database yet: held up in
// a socket buffer or the network, it can arrive after the driver closed the
// connection, and the database runs what it reads before the close. A cleanup that
// looks for the token's row once cannot see such a statement, which would then hold
// the key, under a token nobody has, for its full ttl. So the Locker ends the
// statement's database session first, and waits until it is gone, before it
// releases the row: a session that is gone has committed or rolled back all it ever
// will, and bytes that reach its closed socket later are discarded. This runs in the
// background, with fresh contexts (5s to end the session, then 5s to release).
//
// To name the session before the statement is sent, the Locker asks each new
// connection once for its identity (PostgreSQL: pid and backend_start from
// pg_stat_activity; MySQL: CONNECTION_ID()) and keeps it with the connection; the
// happy path costs no extra round trip. It ends a session with
// pg_terminate_backend(pid, timeout) (PostgreSQL 14 or later; the pool's role may
// signal its own sessions) or KILL CONNECTION (a MySQL user may kill its own
// connections), and waits until pg_stat_activity or the process list no longer
// shows it. Behind a pooler such as PgBouncer, whose server sessions are shared, the
// session cannot be named (the server's pid differs from the one the connection
// reported) and is never ended. When the session cannot be named or ended (a
// pooler, PostgreSQL before 14, a database out of reach for 5s), the Locker still
// releases the row, and a statement that reaches the database later can hold the
// key until its ttl ends: this delays other clients but never gives the key to two
// holders.
//
// SQLite has no such case: the driver runs the statement in the calling process,
// and the call returns only after the statement has committed or rolled back, so
// nothing of it can reach the database after the cleanup looked.
//
// # Safety assumptions
//
// A lease is exactly as safe as the database that keeps its row:
//
//   - The database's clock: expiry is computed by the database's now() (MySQL:
//     UTC_TIMESTAMP(6)), so client clocks do not matter, but the database host's
//     clock must run at the clients' rate and must not jump: a step forward (a
//     manual change, an NTP step rather than a slew) expires every lease early, and
//     another client may acquire a key whose holder's Expires is still ahead. A
//     failover to a host whose clock is ahead does the same.
//   - Transactions: each statement runs alone in its own transaction (autocommit)
//     and decides on the latest version of the row, which it locks, so any
//     isolation level works (a serialization failure is retried). The statements
//     must reach the primary: a read replica rejects the writes and, through a
//     proxy that splits reads, Inspect may read a stale row.
//   - Durability: an acquisition is safe once committed. With asynchronous commit
//     (PostgreSQL synchronous_commit=off, fsync=off; InnoDB
//     innodb_flush_log_at_trx_commit other than 1), a database crash can lose the
//     last committed acquisitions and renewals: a lease its holder believes held is
//     gone, and a fence can repeat.
//   - Replication and failover: a lease lives on the primary. With asynchronous
//     replication, a replica that is promoted may lack the latest acquisitions and
//     renewals: a lease can be lost (two holders) and a fence repeated. Use
//     synchronous replication (PostgreSQL synchronous_commit=remote_apply or on with
//     synchronous_standby_names; MySQL semi-synchronous or group replication) if
//     leases must survive a failover, or treat a failover as losing every lease.
//   - Poolers and proxies: a transaction-pooling proxy is fine for the statements
//     (each is its own transaction) but defeats the ending of abandoned sessions
//     (see above), and PostgresLocker's Wait needs a session that can LISTEN. A
//     MySQL proxy that multiplexes server connections among clients (ProxySQL)
//     makes CONNECTION_ID() name a connection that may serve another client by the
//     time an abandoned acquire is cleaned up, and KILL would end that client's
//     connection: turn multiplexing off for the Locker's user.
package sqllock
