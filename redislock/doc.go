// Package redislock is a distlock backend on one Redis deployment: a single server,
// a master managed by Sentinel (redis.NewFailoverClient) or a Redis Cluster
// (redis.NewClusterClient), through go-redis v9.
//
//	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	l, err := redislock.New(client, nil) // bad options are the error
//	defer l.Close()                      // stops its pub/sub connection; client stays open
//	lease, err := l.TryLock(ctx, "nightly-report", 30*time.Second)
//
// A *Locker implements distlock.Locker, distlock.Waiter and distlock.Inspector; use
// it with distlock.Lock, Hold and Do. Every error it returns is an
// *distlock.OpError (Backend "redislock"); test its cause with errors.Is against
// distlock.ErrLocked, ErrNotHeld, ErrInvalid, ErrClosed or a context error.
//
// # The Redis model
//
// A lease is one Redis string key with a time to live, kept by the server's clock:
//
//   - TryLock runs one Lua script that sets the lock key to "<token>|<owner>" if it
//     is absent (SET ... NX PX ttl) and then increments the key's fence counter
//     (INCR), whose new value is the fence. It is one round trip and atomic on the
//     server. While the lock exists, its fence counter holds its fence. The script
//     first checks that its token is not marked abandoned (EXISTS; see Failure
//     handling).
//   - Renew runs a script that checks that the lock key still holds the lease's
//     token and then sets its time to live to ttl (PEXPIRE) if it has less than
//     that left: a Renew never shortens the lock, so one whose reply is lost
//     leaves the old Lease's Expires a valid bound.
//   - Unlock runs a script that checks the token, deletes the lock key and
//     PUBLISHes on the key's release channel.
//   - The TryLocks, Renews and Unlocks of one Locker share round trips: while 8
//     calls (or batches) are in flight, the calls that come wait and then go out
//     together in one pipeline, each with its own reply (one read and one write in
//     the client and in the server for the batch). Up to 8 concurrent calls go as
//     plain calls, in parallel. A call whose context ends while it waits leaves the
//     queue unsent (an Unlock is sent all the same); one whose batch is in flight
//     returns ctx's error as below; calls that wait 500ms for a slot go alone.
//   - Wait subscribes to the release channel, then reads the lock's remaining time
//     to live (PTTL), and returns on the release message, when that time has passed,
//     or when its context ends. A lock that expires publishes nothing; the time to
//     live bounds the wait instead. The Waits of one Locker share one pub/sub
//     connection, and a channel stays subscribed between the Waits of a wait loop,
//     so that the TryLock before a Wait, which reports the holder's time to live
//     when it finds the key held, serves as its check: in distlock.Lock's loop each
//     failed attempt costs one request. A release wakes one Wait of the key per
//     Locker (the next only if it does not try the key), not every waiter.
//   - Inspect reads the fence, the owner label and the remaining time to live.
//
// Scripts run with EVALSHA and fall back to EVAL when the server does not have them
// cached (after a restart or a failover). ttl is rounded up to a whole millisecond,
// so the server never frees a key before the Lease's Expires, which is taken before
// the request is sent.
//
// The release uses classic PUBLISH, not sharded SPUBLISH: it works on every Redis
// from 2.6 on and on every topology; on a Cluster the message is broadcast to all
// nodes over the cluster bus, which costs one small message per node per Unlock.
// Waiters never depend on the message for correctness (the time to live bounds every
// wait), so a lost message costs only latency.
//
// # Key layout
//
// For a key K and the prefix P (Options.Prefix, default "distlock"), the Locker
// uses
//
//	P:{T}:lock:K      the lock (a string with a time to live)
//	P:{T}:fence:K     the fence counter (never expires, never deleted)
//	P:{T}:release:K   the pub/sub channel that Unlock publishes on
//	P:{T}:abandoned:N the marker of an abandoned TryLock whose token is N (lives 5 minutes)
//
// where T is the first 8 bytes of SHA-256(K) in hex. Redis Cluster hashes only the
// text inside the first {...}, which is always T: P may not contain braces, and T is
// hex. So the lock and fence keys of one K live in one slot (as a script needs),
// whatever bytes K holds, and different keys spread over the slots. K itself follows
// in full, unescaped, after a fixed-length part, so two different keys (or prefixes)
// can never share a Redis key; K may hold any bytes: NUL, '{', '}', '/', spaces,
// unicode. Keys are at most MaxKeyLen bytes (8 KiB).
//
// The fence counter outlives its lock on purpose: it is what makes fences increase
// across Unlock and expiry. It costs one small key per distinct lock key ever used;
// a deployment that locks unboundedly many distinct keys must plan for that (or
// delete fence keys it will never lock again, accepting that their fences restart).
//
// # Safety assumptions
//
// A lock is only as safe as the server that keeps it. Each assumption below names
// what breaks when it does not hold; Locker.CheckServer reads the settings it can
// (CONFIG GET, INFO) and reports each one that breaks an assumption, or says what it
// could not check. Call it at start-up: New does no I/O.
//
//   - Eviction: maxmemory-policy noeviction (Redis' default). With volatile-* Redis
//     evicts lock keys when memory runs short, and a second client acquires a key
//     that is still held; with allkeys-* it evicts fence counters too, and fences
//     repeat. Several managed services default to volatile-lru. CheckServer
//     reports any other policy.
//   - Persistence: appendonly yes with appendfsync always. With appendonly no
//     (Redis' default) a restart loses every lock the last RDB snapshot lacks (two
//     holders until their ttl) and resets fence counters (fences repeat). With
//     appendfsync everysec or no, a crash of the machine loses the last writes
//     acknowledged (up to about a second, or what the OS had not flushed).
//     CheckServer reports both settings.
//   - Failover and replication: none, or accept its risk. Replication is
//     asynchronous: when Sentinel or Cluster promotes a replica, writes the old
//     master acknowledged but had not copied are lost, so a lock just taken can
//     vanish (two holders) and a fence counter can step back (fences repeat). The
//     WAIT command does not close this hole. Where a failover must never break
//     mutual exclusion, use a consensus store (package etcdlock or zklock) or
//     RedLock over independent masters (package redlock), and in all cases have the
//     protected resource check fences. CheckServer reports a replica behind the
//     client and a master with replicas.
//   - Late requests: a TryLock's request that reaches the server more than 5
//     minutes after the cleanup of its abandoned attempt (see Failure handling)
//     takes the key for its ttl under a token that no one holds: other lockers
//     wait up to that ttl (mutual exclusion and fences are unaffected). Linux
//     gives up resending what a closed connection had not delivered after about
//     100s (tcp_orphan_retries, with a 200ms retransmission timeout); a proxy
//     between the clients and Redis that holds requests longer breaks this.
//     Each abandoned attempt costs the server one small key for those 5 minutes.
//   - Clocks: expiry uses the server's clock. A server whose clock jumps forward
//     expires locks early; keep it monotonic (NTP slewing, not stepping). A client
//     that pauses (GC, a stopped VM) past its Lease's Expires must assume the lease
//     lost: that is what Expires and fences are for. Nothing in redislock detects a
//     clock jump; check the servers' time discipline.
//
// # Failure handling
//
// TryLock and Renew count a lease from the time taken before their request was sent.
// When the reply comes after start + ttl (a slow network, a paused client), the lease
// has already expired: they return an error instead (not ErrLocked, not
// ErrNotHeld), and TryLock removes the lock it made, as below.
//
// After an attempt whose outcome is unknown (a timeout, a broken connection, a
// context that ended while the request was in flight), TryLock returns an error that
// is not ErrLocked and cleans up in the background, with a fresh context bounded by
// Options.CleanupTimeout (default 5s), never the caller's dead one: one script marks
// the attempt's token abandoned (a key P:{T}:abandoned:<token> that lives 5
// minutes) and deletes the lock that the attempt may have made, with its token. It
// runs as soon as the caller gives up (whether or not the attempt reached the
// server), and again after a pause while it fails. The acquire script changes nothing when its token is
// marked: a copy of the attempt that reaches the server after the cleanup (held up
// on its connection, in a proxy or in the network: closing the connection does not
// recall bytes already sent) cannot lock the key under a token that no one holds.
// go-redis resends a command whose connection broke (MaxRetries); the acquire
// script recognizes its own token, so a resent acquire returns the same lease
// instead of ErrLocked.
//
// Calls honour their context even though go-redis does not interrupt a command that
// is waiting for its reply: when ctx can be cancelled, the command runs on another
// goroutine (one of a few that the Locker keeps while calls keep coming, and ends
// after 100ms idle or at Close) and the call returns when ctx is done; the command
// then ends within the client's ReadTimeout (go-redis' default is finite). Calls
// with context.Background() run on the caller's goroutine, which spares the
// handoff to another goroutine and back; only Close can end such a call, and it
// returns when its command ends, within the client's ReadTimeout.
//
// Validation, Expires and the late-reply rule, the cleanup's scheduling and Close
// are the driver package's core (driver.Locker), which the Locker runs over its
// one-attempt scripts.
//
// The Waits of a Locker share one pub/sub connection (go-redis keeps about 74 KB of
// buffers per connection), opened by the first Wait and closed 5s after the last
// one ended, by Locker.Close, or when the client is closed; it is pinged when it
// has been silent for 5s, and replaced when the PING is not answered within 5s
// more (a NAT or load balancer may drop an idle connection without a word).
// Thousands of concurrent waiters in one process share it; waiters in many
// processes each have their own. A connection that breaks or is replaced wakes the
// Waits in progress (a release message may have been lost), and go-redis
// reconnects and subscribes again. Until a Wait's subscription is confirmed, the
// holder's time to live, read at once, bounds it: a dead connection costs a Wait at
// most the holder's remaining ttl.
//
// # Lifecycle
//
// New checks its arguments and does no I/O; a nil client or an invalid Options (a
// Prefix with braces, an Owner label over MaxOwnerLen bytes, a negative
// CleanupTimeout) is its error, an *distlock.OpError wrapping distlock.ErrInvalid.
// Zero fields take the documented defaults. Close ends the calls in flight, waits
// for the cleanups of abandoned TryLocks, stops the Locker's pub/sub connection and
// waits for its goroutines and for the commands its calls left running; it never
// closes the client. After Close every method returns
// an error wrapping distlock.ErrClosed.
package redislock
