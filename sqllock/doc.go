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
// deadlock (or a busy SQLite file) are retried a few times. After a TryLock whose
// outcome is unknown (a cancelled context, a broken connection), the Locker releases
// its own possibly-made lock with a fresh context bounded by a few seconds.
//
// Lease.Expires is the time taken before the statement was sent plus ttl; the row
// expires no earlier than that by the database's clock, as long as the database's
// clock runs at the client's rate.
//
// PostgresLocker also implements distlock.Waiter with LISTEN/NOTIFY: Unlock notifies
// in its own statement. MySQL and SQLite Lockers have no Waiter; distlock.Lock polls
// them with backoff.
package sqllock
