// Package redlock is a distlock backend that runs the RedLock algorithm over N
// independent Redis masters, through go-redis v9.
//
//	clients := []redis.UniversalClient{ // five masters, no replication between them
//		redis.NewClient(&redis.Options{Addr: "10.0.0.1:6379"}),
//		// ... four more
//	}
//	l, err := redlock.New(clients, nil) // bad options or clients are the error
//	defer l.Close()                     // stops its pub/sub connections; clients stay open
//	lease, err := l.TryLock(ctx, "nightly-report", 30*time.Second)
//
// A *Locker implements distlock.Locker, distlock.Waiter and distlock.Inspector; use
// it with distlock.Lock, Hold and Do. Every error it returns is an
// *distlock.OpError (Backend "redlock"); test its cause with errors.Is against
// distlock.ErrLocked, ErrNotHeld, ErrInvalid, ErrClosed or a context error.
//
// The package is a fan-out of N single-node Redis cores (internal/redisx, shared
// with package redislock: the owner-checked scripts, the key layout and the pub/sub
// hub of Wait) plus the quorum logic of this package.
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
//  4. Renew extends the token's locks (an owner-checked PEXPIRE that never shortens
//     a lock) on every master and needs a quorum; Unlock deletes them (owner-checked) on every master and
//     publishes the release (the SHA-1 of the token); Wait subscribes to that
//     release on every master. Concurrent Renews of one Locker (distlock.Hold with
//     many leases) share round trips: while one batch of Renews is in flight, the
//     others wait and go out in the next batch (up to 1,024, oldest first:
//     renewbatch.go): one fan-out, and on each master one pipeline of multi-key
//     scripts of 256 leases (internal/redisx's Node.RenewMany), with a reply per
//     lease, so every lease's quorum is counted from its own answers
//     (TestRenewShared: 1,000 concurrent Renews cost each master about 0.01 reads
//     per renewal, not 0.8; TestRenewSlowMasters: 400 Renews while every master
//     is stopped cost 3 scripts per master once they resume, not 400).
//
// TryLock returns distlock.ErrLocked only when other owners' locks on the masters
// that answered kept the attempt from a quorum those masters could have given; when
// too few masters answered, it returns an error, naming each failing master, that
// does not wrap ErrLocked. Even N is allowed but wasteful: 4 masters tolerate one
// failure, as 3 do.
//
// One attempt per key of a Locker is in flight at a time: a TryLock that finds
// one waits for it and returns ErrLocked when it acquired the key (held by the
// Locker's other caller during this call) or when it began after this call and
// found the key held; otherwise it makes its own. Hundreds of TryLocks of one key
// through one Locker (a herd of waiters) so cost a few rounds, not hundreds that
// would fill the clients' connection pools, run past the node timeout and fail
// with errors instead of ErrLocked (TestOneAttemptPerKey).
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
//     the usual case, phase 2 is skipped: one round trip. Locked masters that are
//     not needed for the quorum are raised in the background, to keep them in
//     step; a master held by another owner is left as it is (phase 1 does not read
//     its counter, which that owner's attempt incremented).
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
// RedLock is only as safe as its masters and clocks. Each assumption below names
// what breaks when it does not hold; Locker.CheckServer reads the settings it can
// (CONFIG GET, INFO on every master) and reports each one that breaks an
// assumption, or says what it could not check. Call it at start-up: New does no I/O.
//
//   - Eviction: maxmemory-policy noeviction (Redis' default) on every master. With
//     volatile-* a master evicts lock keys when memory runs short; with allkeys-*
//     fence counters too. A master that forgot a lock can complete a second quorum.
//     CheckServer reports any other policy.
//   - Persistence: a master either keeps every acknowledged write across a restart
//     (appendonly yes, appendfsync always) or comes back empty (appendonly no and
//     save ""). A master that comes back empty is detected and kept out of quorums
//     for a little over Options.MaxTTL (see "Masters that lose their data"); one
//     that comes back with old data (an RDB snapshot, or the last writes lost by
//     appendfsync everysec or no when its machine crashed) cannot be told from a
//     healthy one, and its forgotten locks and fence increments break both
//     exclusion and fences. CheckServer reports appendfsync other than always and
//     appendonly no with RDB snapshots.
//   - Failover and replication: none. The masters must be independent: a replica
//     promoted after its master acknowledged a lock it had not copied is a master
//     that forgot the lock, with the rest of its data intact, so it is not detected.
//     Each master is one standalone server (New rejects Cluster and Ring clients)
//     reached by one client (CheckServer reports two clients that reach one server).
//   - Losses: at most N - quorum masters (2 of 5; 1 of 3 or of 4) are lost at
//     any one time, where a master is lost from the moment it loses its data until
//     it has its fence era again: its quarantine (1.1 * MaxTTL plus the drift
//     allowance, from the first attempt that reaches it after the loss), then one
//     probe of the Locker whose attempt found it (see "Masters that lose their
//     data"). A master is only found when an attempt reaches it, and only a
//     Locker that stays open adopts it by itself: in a deployment with some
//     Locker open, losses 1.2 * MaxTTL apart are safe whatever the traffic;
//     a process that takes a lock and exits (a cron job) leaves a master it found
//     empty lost until its next run, unless it stays open until that master's
//     quarantine has ended. When more masters are lost at once and some kept
//     their marker (a master that kept its data, or one that came back empty and
//     waits for its era), no fence is issued and no lock granted until an operator
//     starts the deployment again: the fences and locks stay safe, the keys
//     unavailable. When every master lost everything, nothing can tell the
//     deployment from a new one: fences start again at 1 (above
//     Options.FenceFloor when set) and keys may be granted twice, as with any
//     store that loses a majority. Nothing can detect that; keep the masters'
//     failures independent (separate machines and power).
//   - Clocks: the masters' and the clients' clocks advance at nearly the same rate
//     (within DriftFactor). A master's clock that jumps forward (a manual change,
//     NTP stepping rather than slewing) expires locks early and can let two clients
//     hold a key. A process pause (GC, a stopped VM) longer than the remaining
//     validity makes a holder outlive its lease: check Lease.Expires, and let the
//     protected resource check fences. Nothing in redlock detects a clock jump;
//     check the masters' time discipline.
//   - Ttls: every Locker of a deployment uses the same Options.MaxTTL (or a larger
//     one than any ttl in use): the quarantine of a master that came back empty is
//     the MaxTTL of the client that first reaches it. Nothing checks this across
//     clients: set it in one place.
//
// # Masters that lose their data
//
// Besides the locks, every master keeps two keys of its own: a marker without expiry
// ("<epoch>|<era>") and, while it is kept out, a quarantine with a time to live. A
// master that answers without its marker lost its data (or is new): the acquire
// script writes a marker and a quarantine of MaxTTL plus a tenth plus its drift
// allowance, on that master's clock, and refuses the lock. Every lock it forgot had at most MaxTTL left
// when it was lost, and every lease that counted such a lock had its Expires before
// that lock ended, so when the quarantine ends no lease can depend on what the master
// forgot. Until then the master takes no lock and counts towards no quorum; the
// lease that held it keeps its quorum on the others if it had one without it
// (a lease normally holds every master that is up), and another client gets
// ErrLocked from the others.
//
// Its fence counters are gone too, and waiting does not bring them back: a
// counter that restarts at 0 could repeat a fence that only the lost master and a
// minority that missed it ever recorded. So fences carry an era: a counter a master
// creates starts at era * 2^40, and a fence's era part is fence / 2^40. A master
// that came back empty gets an era once its quarantine has ended: one above the
// largest era among a quorum of other masters that have one, read after the
// quarantine's end (the reads take at most NodeTimeout(MaxTTL), a tenth of MaxTTL,
// which the quarantine allows for). A Locker whose attempt finds a master kept
// out probes every master when that master's quarantine ends, and again every
// tenth of MaxTTL while it has no era, and the Locker is open; so, while a quorum
// of the other masters answers, it counts again within its quarantine plus about
// twice NodeTimeout(MaxTTL), with no other traffic (TestLossWalk). The raise of phase
// 2 lifts a master's era to the era part of any fence it records. Why a later
// acquisition B then still gets a larger fence than an earlier one A, when B's
// quorum reaches A's only through a master m that lost its data in between: m's new
// era was set after A's quorum had recorded fA (A's attempt ended before m's
// quarantine did), from a quorum that shares a master with A's, which holds an era
// at least fA's era part (or is itself a master that came back since, with an era
// set the same way, above it); so every counter m creates, and every fence B reads
// from m, is above fA. Fences jump by 2^40 when a master that came back empty takes
// part: they stay increasing, not consecutive. Eras must stay below 2^13 (Lua's
// numbers are doubles): 8191 losses of a master's data over a deployment's life.
//
// A new deployment has no markers at all. When every one of the N masters answers
// an attempt and none of them counts, and none was found empty while another
// master had an era (an attempt that finds a master empty while others count tags
// its marker as lost in a running deployment), the attempt brings them all in at
// once, at era 0 (or above Options.FenceFloor), and tries again: start a
// deployment, or upgrade from a version without markers; a master that is down
// then delays the start until it is up. When some marker carries the tag, a master
// came back empty while too many others lacked their era, and the fences issued
// before are known to none of them: TryLock then returns an error that says so,
// rather than start the fences again. An operator starts such a deployment again
// once no lease is in use (or MaxTTL after the last one): delete the marker and
// the quarantine (P:node, P:quarantine) on every master, and set
// Options.FenceFloor of the Locker that takes the first
// lock at or above the largest fence issued (the protected resources know it), so
// that its fences start above it (TestNoNewDeploymentAfterLosses). Set FenceFloor
// too when every master lost its data.
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
// takes both sides' points: it keeps the timing checks of RedLock, enforces its
// delayed-restart rule itself (a master that comes back empty is kept out for
// MaxTTL), and adds fences that increase across majorities and across lost data, so
// a resource can reject a stale holder rather than trust timing alone.
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
//	P:{T}:release:K   the pub/sub channel of K's releases
//	P:{T}:release:K|I the turn channel of K of the Locker whose ID is I: a
//	                  release that names I (or names the Locker before I) goes there
//	P:{T}:turns:K     the Lockers that wait on K, in line (a sorted set of their
//	                  IDs, expiring twice the ttl after the last one joined)
//	P:node            the master's marker: "<epoch>|<era>", never expires (the
//	                  epoch ends in '+' when the master was found empty while
//	                  others had an era)
//	P:quarantine      present, with a time to live, while the master is kept out
//
// where T is the first 8 bytes of SHA-256(K) in hex. K follows in full, unescaped, after a
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
// finishes within the client's own timeouts (Close waits for it).
//
// # Wait
//
// The clean-up of a failed attempt publishes on the key's channel on every master
// it releases, with the SHA-1 of the released token as the message (not the token,
// which Unlock and Renew check); Unlock's release goes to the turn channels of the
// Locker it names and of the one after it in line, and to the key's channel only
// when it names nobody or one of those two channels has no subscriber (see below).
// Wait subscribes to the key's channel and to its Locker's turn channel on every
// master and reads the locks (the holder's digest and time to live on each) once
// enough subscriptions are confirmed that any quorum's release reaches it; until
// then, a read sent at once bounds it by the holders' times to live. A Wait that
// follows a TryLock of its Locker that found the key held on N-quorum+1 masters
// whose channels were already subscribed, with no message since that may be the
// release of the holder it saw there (one with that holder's digest, or an empty
// one), skips the read: that TryLock was it.
//
// Each master keeps the key's turns, the Lockers that wait on the key in line (each
// Locker has a random ID): a TryLock that finds the key held joins them when its
// Locker waits on the key (the key's channel is subscribed), as does a Wait's read
// of the locks, and Unlock's release names the first Locker and takes it out
// ("<digest>|<Locker ID>"). Only the Locker named and the one after it hear the
// release (their turn channels): the others in line would only ignore it, so a
// release is read by two Lockers, not by every Locker in line. A Locker in line wakes on a release that names it (or nobody); the
// one after it tries anyway when no release came 50ms after (the Locker named may
// have no waiter left); and a Locker whose turn channel hears a release while it
// has no Wait on the key passes it on to the key's channel, where the others hear
// it and do the same (TestTurnPassedOn, TestTurnPassedOnTwice). So a release costs one attempt, by
// the Locker whose turn it is, not one per Locker with waiters; a Locker with more
// waiters goes to the end of the line when it takes the key (TestTurnsOneRound,
// TestTurnsHerd). The turns decide who tries first, never who holds the key.
// The release reaches the masters one by one, and the Locker named may try the
// key before enough of them ran it: its TryLock then fails, finding the released
// token still held, and its Locker wakes again once the release's messages came
// from as many more masters as a quorum needs (retry.go, TestTurnLateRelease).
//
// The Waits of one Locker on a key form one line (internal/waitq). A release wakes
// the first of them only, on the first master's message: the next one wakes when
// the woken caller does not start its TryLock within the handoff time (20ms), or
// when that attempt fails for another reason than contention; an attempt that finds
// the key held ends the handoff. A release matters when its digest belongs to a
// holder that the Locker saw (a TryLock of the Locker, a Wait's read, or the
// Locker's own acquisition) and whose release could free a quorum, so the clean-up
// of another waiter's failed attempt on a master or two wakes nobody; an empty
// message (an older version) always matters, and each release is announced once, not
// once per master. A herd of waiters therefore costs each Locker with waiters about
// one attempt per release, not one per waiter (TestNoHerd). Messages that arrive
// between a Wait's subscription and its read are kept, not lost (redisx's Inbox);
// only one Wait of the Locker on the key reads them, so a message wakes one
// goroutine per Locker, not one per Wait. A Wait whose holders' times to live end
// returns by itself.
//
// The Waits of one Locker share one pub/sub connection per master, opened by the
// first Wait and closed a few seconds after the last one (or by Close, or with the
// clients), so a waiter that loops on TryLock and Wait does not dial each time. A
// connection that has been silent for 5s is pinged, and replaced when the PING is
// not answered within 5s more (a NAT or load balancer may drop an idle connection
// without a word); a connection that breaks or is replaced wakes the Waits in
// progress, since a release may have been missed.
//
// # Lifecycle
//
// New checks its arguments and does no I/O; bad clients or Options are its error,
// an *distlock.OpError wrapping distlock.ErrInvalid. Close stops the pub/sub
// connections and waits for the work that calls left running on the masters (late
// answers, clean-ups, raises), each bounded by the node timeouts and
// Options.CleanupTimeout; it never closes the clients. After Close every method
// returns an error wrapping distlock.ErrClosed.
package redlock
