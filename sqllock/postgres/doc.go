// Package postgres keeps distlock leases as rows of a table in PostgreSQL (14 or
// later), through a pgx v5 pool. It imports no other database driver.
//
//	pool, err := pgxpool.New(ctx, "postgres://user:password@host/db")
//	...
//	defer pool.Close()
//	locker, err := postgres.New(ctx, pool, nil) // table distlock_leases, created if missing
//	...
//	defer locker.Close()
//	lease, err := distlock.Lock(ctx, locker, "migrations", time.Minute, nil)
//
// The table, its statements, Prune and the cleanup of abandoned acquires are
// described in package sqllock; DDL returns this dialect's CREATE TABLE, for
// schemas managed by migrations (with sqllock.Options.SkipCreateTable).
//
// The Locker implements distlock.Waiter with LISTEN/NOTIFY: Wait listens on a
// connection of its own, outside the pool, which the Locker's Waits share and
// which stays open for 5s after the last Wait returned (Close closes it). On that
// connection a Wait registers its key, before it reads the key's row, with a
// session-level shared advisory lock (pg_advisory_lock_shared(t, k): t derived
// from the table's name, k from the key; kept for 5s after the key's last Wait,
// one entry of the server's lock table per key being waited for). Unlock, in its
// own statement, tries that lock exclusively for its transaction and notifies
// only when it is taken: NOTIFY serializes the commits of every notifying
// transaction of the server, and an Unlock that no Wait needs should not pay for
// it. A notification wakes one Wait of the key per Locker (the first; the next
// when the woken caller does not try the key), so that 1,000 waiters cost a few
// statements per release, not 1,000 TryLocks. A Wait of an older version of this
// package registers nothing, so Unlocks of this version do not wake it (it waits
// for the lease's expiry): upgrade every process that Waits. An application's own two-key advisory locks (int4, int4)
// could share a (t, k) pair: that only costs a spurious notification, or makes its
// exclusive lock wait while a Wait is registered.
//
// # Concurrent calls
//
// A Locker has at most one round trip of its TryLocks in flight: the TryLocks that
// come while it is in flight queue, and go together as the next round trip, a
// pipeline of their statements (each as it runs alone) with one commit for all of
// them. Each caller gets its own statement's result: its own fence or ErrLocked.
// The statements run in key_hash order, so that batches of several Lockers lock
// rows in one order; a batch that the database rejects (a deadlock, a
// serialization failure: it had no effect) runs each statement alone. A round trip
// in flight for longer than 20ms (one that waits for a row lock) stops counting,
// so that it holds up the Locker's other TryLocks no longer than that. A caller
// whose context ends returns at once; the batch goes on for the others (its
// context ends only when every caller's has), and when it may have taken the
// leaving caller's row, the clean-up below waits for the batch to end (and ends
// its session when its outcome is unknown) before it releases the row. A lone
// caller runs its own statement on its own context. Lease.Expires counts from
// before the call queued. Unlocks share round trips the same way, among themselves
// (at most one in flight, a pipeline of their statements in key_hash order with
// one commit): an Unlock never queues behind TryLocks. Inspect runs its own
// statement (Renews share theirs: see package sqllock).
//
// # Abandoned acquires
//
// The Locker names each pooled connection's session by its pid and backend_start
// (from pg_stat_activity, asked once per connection) and ends the session of an
// acquire whose outcome is unknown with pg_terminate_backend(pid, timeout), which
// needs PostgreSQL 14; the pool's role may signal its own sessions. Behind a
// pooler such as PgBouncer, whose server sessions are shared, the server's pid
// differs from the one the connection reported, and the session is never ended
// (see package sqllock for what that means).
//
// # Safety assumptions
//
//   - The database's clock runs at the clients' rate and does not jump: a step
//     forward (a manual change, an NTP step rather than a slew, a failover to a
//     host whose clock is ahead) expires every lease early, and another client may
//     acquire a key whose holder's Expires is still ahead; expiry uses now(), so
//     client clocks do not matter, but keep the server's clock slewed by NTP.
//   - Each statement reaches the primary and decides on the latest version of the
//     row: a read replica rejects the writes, and a proxy that splits reads may
//     answer Inspect from a stale replica; any isolation level works (a
//     serialization failure is retried).
//   - Committed transactions survive a crash: with synchronous_commit=off or
//     fsync=off a crash can lose the last acquisitions and renewals, so a lease
//     its holder believes held is gone and a fence can repeat; keep both on.
//   - A failover keeps what the old primary committed: with asynchronous
//     replication a promoted standby may lack the latest acquisitions and
//     renewals (two holders, a repeated fence); use synchronous replication
//     (synchronous_commit=remote_apply, or on with synchronous_standby_names), or
//     treat a failover as losing every lease.
//   - Sessions are the server's own: a transaction-pooling proxy (PgBouncer) is
//     fine for the statements but defeats the ending of abandoned sessions, so a
//     late statement may hold a key for its ttl, and Wait needs a session that can
//     LISTEN; point the pool at the server, or accept the delay.
//   - Every process that uses the table runs a version of this package with Prune
//     when Prune runs: an older one starts a pruned key's new row at fence 1.
package postgres
