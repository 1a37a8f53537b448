// Package distlock is one contract for distributed locks (leases) with
// interchangeable backends: single Redis (redislock), RedLock over N Redis masters
// (redlock), ZooKeeper (zklock), etcd (etcdlock), SQL lease rows in PostgreSQL,
// MySQL/MariaDB and SQLite (sqllock/postgres, sqllock/mysql, sqllock/sqlite, over the
// shared core sqllock), and an in-process table (memlock). The package
// conformance proves a backend against the contract; run it against your own.
//
// # Leases
//
// A lock here is a lease: TryLock grants a key for a ttl, Renew extends it, Unlock
// gives it back, and a holder that stops renewing (it crashed, it paused, it lost
// the network) loses the key when the ttl runs out. That is what keeps a crashed
// holder from blocking everyone forever, and it is also why no lock can promise
// more than this: until Lease.Expires, nobody else holds the key. Past Expires the
// holder must assume someone else may.
//
// Expires is read on Go's monotonic clock, which on Linux does not advance while
// the machine is suspended (a laptop lid, a VM suspended by its host): after such a
// suspend a holder would think its lease younger than it is. Fences are the defence
// against that too; do not run lock holders on machines that suspend.
//
// Most code does not call the Locker directly:
//
//   - Lock blocks until it acquires a key (through the backend's Waiter when it
//     has one: Redis pub/sub, etcd and ZooKeeper watches, PostgreSQL LISTEN/NOTIFY;
//     else full-jitter exponential backoff).
//   - Hold renews a lease in the background (every ttl/3) and cancels
//     Held.Context, with a cause wrapping ErrNotHeld, as soon as the lease is lost.
//   - Do acquires, holds, runs a function under the held context and releases; its
//     MinHold option keeps a short job from running twice on instances whose
//     schedules fire a little apart.
//
// # Errors
//
// Test errors with errors.Is against three sentinels:
//
//   - ErrLocked: another owner holds the key. Only contention gives it; a backend
//     that cannot reach its server returns some other error. Lock and Wait return
//     errors.Join(ErrLocked, ctx.Err()) when the caller's context ends while the key
//     is held, so both errors.Is(err, ErrLocked) and
//     errors.Is(err, context.DeadlineExceeded) hold.
//   - ErrNotHeld: the lease expired, was released, or another owner holds the key
//     now (Renew, Unlock, Inspect of a free key, and the cause of a Held.Context
//     that was cancelled because its lease was lost).
//   - ErrInvalid: a bad argument, with a message that names it.
//   - ErrClosed: the Locker was closed.
//
// Backends wrap every error in an *OpError that names the backend, the operation
// and the key (shortened in the message); errors.As gives you its fields.
//
// Any other error from Renew (a timeout, a lost reply) leaves the lease in an
// unknown state that its old Expires still bounds: a Renew never shortens what the
// server holds, so whatever the server did, nobody else can hold the key before the
// old Expires. Hold retries such errors until then.
//
// # Fencing
//
// A lease cannot stop a holder that pauses (a GC pause, a swapped-out VM, a slow
// disk) past its Expires and then writes, believing it still holds the key. The
// remedy (Martin Kleppmann, "How to do distributed locking", 2016) is a fencing
// token: every acquisition of a key gets a Fence strictly greater than every earlier
// one's, the holder sends it with each write, and the resource rejects a write whose
// fence is lower than one it has already seen. Every backend here provides Fence:
// a Redis counter, a RedLock quorum counter, ZooKeeper's czxid, etcd's create
// revision, an SQL column. See examples/fencing.
//
// # Choosing a backend
//
//   - memlock: one process; tests of code that takes a Locker.
//   - sqllock/postgres, sqllock/mysql: you already run PostgreSQL or MySQL; the
//     lock lives with your data, on the database's clock. sqllock/sqlite for one host.
//   - redislock: you run Redis and want the lowest latency; a failover to a replica
//     can lose a lock (replication is asynchronous), so use fences.
//   - redlock: no single Redis may take the lock down with it; costs N round trips
//     and assumes bounded clock drift.
//   - etcdlock, zklock: the consensus stores; the strongest guarantees, a session
//     or lease model, and the slowest acquire.
//
// # Testing
//
// Pass a memlock.Locker to the code under test; memlock.Revoke takes a lease away,
// as an expiry or a failover would, so you can test what your code does on loss. To
// prove a backend of your own, call conformance.Run from its test.
//
// # Observability
//
// Lock, Hold and Do report every attempt (contention included), wait, acquisition,
// renewal, loss and release to the Observer in their options: a *slog.Logger and an
// OnEvent hook, both called with the caller's context so that traces connect. The
// package otelobserve turns them into OpenTelemetry metrics and spans. There is no
// global state: nothing is registered or logged unless you pass it in.
package distlock
