// Package redlock is a distlock backend that runs the RedLock algorithm over N
// independent Redis masters, through go-redis v9.
//
//	clients := []redis.UniversalClient{ // five masters, no replication between them
//		redis.NewClient(&redis.Options{Addr: "10.0.0.1:6379"}),
//		// ... four more
//	}
//	l, err := redlock.New(clients, nil)
//	lease, err := l.TryLock(ctx, "nightly-report", 30*time.Second)
//
// A *Locker implements distlock.Locker, distlock.Waiter and distlock.Inspector; use
// it with distlock.Lock, Hold and Do.
//
// # The algorithm
//
// A lease is held when a quorum of the N masters (N/2+1: 3 of 5) each hold a lock key
// with the lease's random token and a time to live, kept by that master's clock:
//
//  1. TryLock notes the time (start) and sends, to every master at once, a script
//     that takes the master's lock key if it is free (SET NX PX ttl). Each master
//     gets a per-node timeout far below the ttl (Options.NodeTimeout, at most a
//     tenth of the ttl): a master that is down or slow counts as failed, and never
//     holds the attempt back longer than that.
//  2. The attempt succeeds when a quorum of masters took the lock and time is left:
//     the lease's validity is ttl - elapsed - drift, where drift = ttl*DriftFactor +
//     DriftConst (default ttl*0.01 + 2ms) allows for the clocks' rates, and its
//     Expires is start + ttl - drift, so it is counted from before the requests
//     were sent. A lock on a master was set after start and lives ttl by that
//     master's clock, so up to drift, every lock of the quorum outlives Expires.
//  3. A failed attempt (no quorum, or no validity left) removes its locks from every
//     master, including those whose answer never came, with a fresh context
//     (context.WithoutCancel plus a timeout), never the caller's dead one.
//  4. Renew extends the token's locks (an owner-checked PEXPIRE) on every master and
//     needs a quorum; Unlock deletes them (owner-checked) on every master and
//     publishes the release; Wait subscribes to that release on every master.
//
// TryLock returns distlock.ErrLocked only when other owners' locks on the masters
// that answered kept the attempt from a quorum those masters could have given; when
// too few masters answered, it returns an error, naming each failing master, that
// does not wrap ErrLocked. Even N is allowed but wasteful: 4 masters tolerate one
// failure, as 3 do.
//
// # Fencing across majorities
//
// A counter on one master is not enough: two acquisitions may use different
// majorities, and a master that missed the last one hands out a stale number. Every
// master therefore keeps a fence counter per key (never deleted), and an acquisition
// makes a quorum of masters agree on its Fence before it succeeds:
//
//   - Phase 1 (in the same script as SET NX) increments the counter on each master
//     whose lock it takes and returns it. Fence = the largest value returned.
//   - If fewer than a quorum of the locked masters returned that largest value,
//     phase 2 raises the counter to Fence (SET counter = max(counter, Fence)) on the
//     lagging masters, and the attempt succeeds only when a quorum of masters whose
//     lock it holds carry a counter >= Fence. Where all masters are in step, which is
//     the usual case, phase 2 is skipped: one round trip. Masters that are not
//     needed for the quorum are raised in the background, to keep them in step.
//
// Why a later acquisition B gets a larger fence than an earlier one A (A's window
// ended before B acquired): A made a quorum QA of masters, on each of which it held
// its lock continuously from its phase 1 to its counter write, carry counter >= fA.
// B took its lock on a quorum QB, and any two quorums of N intersect, so some master
// m is in both. On m, B's increment came after A's write: otherwise B's lock was set
// on m before A's, and must have vanished before A's phase 1 there; B cannot have
// released it (B unlocks only after it acquires, which is after A's window), so it
// expired — before A acquired, so before B acquired — but a lock that B's quorum
// counts outlives B's Expires, which is after B acquired (step 2). Counters never go
// down, so B's increment on m returned more than fA, and fB, the maximum, is more
// too. Two attempts cannot both pass phase 1 at once: each needs a quorum of locks,
// and two quorums share a master, which holds one lock at a time.
//
// # Safety assumptions
//
// RedLock is safe only under these assumptions; state them to whoever runs the
// masters:
//
//   - Bounded clock drift: the masters' and the clients' clocks advance at nearly
//     the same rate (within DriftFactor). A master's clock that jumps forward (a
//     manual change, NTP stepping rather than slewing) expires locks early and can
//     let two clients hold a key. A process pause (GC, a stopped VM) longer than the
//     remaining validity makes a holder outlive its lease: check Lease.Expires, and
//     let the protected resource check fences.
//   - Restart rule: a master that crashed must not rejoin empty before the longest
//     ttl in use has passed since it crashed, or it must persist every write before
//     acknowledging it (appendonly yes, appendfsync always). Otherwise a master that
//     forgets a lock can complete a second quorum for the same key at once.
//     Fences are persistent state too, and waiting does not bring back a counter
//     that a master forgot. Without appendfsync always, fences stay increasing only
//     while the masters that restart empty between two acquisitions are fewer than
//     those the last fence reached, plus a quorum, minus N: when it reached all N
//     masters (the usual case, with all of them up), fewer than a quorum may; when it
//     reached a bare quorum of an odd N, none may.
//     Each acquisition raises every master it reaches to its fence, so masters that
//     rejoin empty catch up at the next one. Use appendfsync always where fences
//     protect anything that matters.
//   - The masters are independent: no replication or failover between them (a
//     replica promoted after its master acknowledged a lock it had not copied is a
//     master that forgot the lock).
//
// # The debate
//
// Martin Kleppmann ("How to do distributed locking", 2016) argued that RedLock is
// neither here nor there: for efficiency (avoiding duplicate work) a single Redis is
// enough, and for correctness it is unsafe, because it relies on timing — bounded
// network delay, bounded process pauses and bounded clock error — that real systems
// violate. A client paused by GC after acquiring, or a master whose clock jumps, can
// leave two clients believing they hold the lock, and RedLock hands out nothing the
// protected resource could use to reject the stale one; he proposed fencing tokens,
// monotonically increasing numbers checked by the resource, and a consensus system
// such as ZooKeeper to generate them.
//
// Salvatore Sanfilippo (antirez, "Is Redlock safe?") answered that the algorithm
// assumes bounded clock drift, not synchronised clocks, which is a reasonable model
// when operators do not step clocks; that a client can check the elapsed time after
// acquiring, so pauses during acquisition are detected, and pauses after it hurt
// every lease-based lock, ZooKeeper's included; and that where a resource can check
// fencing tokens, a random token checked by the resource would do. This package
// takes both sides' points: it keeps the timing checks and the restart rule of
// RedLock, and it adds fences that increase across majorities, so a resource can
// reject a stale holder rather than trust timing alone.
//
// # When to prefer etcd or ZooKeeper
//
// Prefer package etcdlock or zklock when mutual exclusion must hold for correctness
// even under the timing failures above, when you already run etcd or ZooKeeper, or
// when you want ordered, fair waiting: their locks rest on consensus (Raft, Zab),
// their revisions and zxids are fences from one linearizable log, and their sessions
// end a lease when its holder dies without anyone trusting a client's clock. RedLock
// suits teams that run Redis anyway and want a lock that survives the loss of a
// minority of independent masters, at low latency, for work that is made safe by
// fencing or that tolerates a rare duplicate.
//
// # Keys on each master
//
// For a key K and the prefix P (Options.Prefix, default "redlock"), every master
// holds
//
//	P:{T}:lock:K      the lock: "<token>|<fence>|<owner>" with a time to live
//	P:{T}:fence:K     the fence counter (never expires, never deleted)
//	P:{T}:release:K   the pub/sub channel that Unlock publishes on
//
// where T is the first 8 bytes of SHA-256(K) in hex, so the keys of one K share a
// slot if a master is itself a Redis Cluster. K follows in full, unescaped, after a
// fixed-length part, so different keys never share a Redis key. The fence counter
// costs one small key per distinct lock key ever used, on every master.
//
// # Slow and dead masters
//
// Each call gives every master a per-node timeout (see Options.NodeTimeout) and
// stops waiting as soon as the answers decide its result: a quorum of locks (or of
// extends, or of releases), or so many refusals or failures that a quorum is out of
// reach. It then waits for the other masters only as long again as it has taken so
// far, so a slow master costs an operation about one healthy round trip, not the
// timeout. A master whose last call failed or timed out is a suspect until a call to
// it succeeds; it is still asked every time, but once the others have decided the
// result (a quorum, or contention), its answer is not waited for. A suspect's
// silence never decides a failure by itself: when too few of the others agree, the
// call waits for the suspects up to the node timeout, since they may be healthy
// again. A lock that a master grants after TryLock stopped
// waiting for it joins the lease when the attempt succeeded (its counter is raised
// to the lease's fence, and Renew and Unlock reach it like the others), so a lease
// normally holds every master that is up, not just a bare quorum, and survives the
// loss of a minority; it is removed when the attempt failed.
//
// go-redis retries a failed dial (DialerRetries, 5 by default, 100ms apart) and a
// failed command (MaxRetries); until a dead master is a suspect, or until go-redis'
// pool gives up dialling it, every call waits the node timeout for it. Give the
// clients a DialTimeout and DialerRetries that fit within the node timeout (see the
// package example), and keep their ReadTimeout finite (go-redis' default is).
//
// # Contexts
//
// go-redis does not interrupt a command that waits for its reply when its context
// ends (unless the client sets ContextTimeoutEnabled). Every call to a master
// therefore runs on a goroutine of its own, and a call returns when its result is
// decided, its node timeout passes, or its context ends; a command left behind
// finishes within the client's own timeouts.
//
// # Wait
//
// Wait subscribes to the key's release channel on every master and reads the locks
// once enough subscriptions are confirmed that any quorum's release reaches it. The
// Waits of one Locker share one pub/sub connection per master, opened by the first
// Wait and closed a few seconds after the last one (or by Close, or with the clients),
// so a waiter that loops on TryLock and Wait does not dial each time.
package redlock
