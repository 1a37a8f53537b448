// Package etcdlock is a distlock backend on etcd v3 leases
// (go.etcd.io/etcd/client/v3).
//
//	l, err := etcdlock.New(client, nil) // client is a *clientv3.Client; nil: default Options
//	if err != nil { ... }               // an invalid option
//	defer l.Close()                     // before client.Close
//	lease, err := l.TryLock(ctx, "nightly-report", 30*time.Second)
//
// A *Locker implements distlock.Locker, distlock.Waiter, distlock.Inspector,
// distlock.LossNotifier and distlock.LossWatcher; use it with distlock.Lock, Hold
// and Do.
//
// Each acquisition creates the lock key on an etcd lease of its own, in one
// transaction that succeeds only if the key does not exist. The key lives at most
// as long as the lease: Unlock deletes it, and the server deletes it when the lease
// expires, by the server's clock. The Fence is the key's create revision (the
// transaction's revision), which the cluster's revision makes strictly increasing,
// across clients, server restarts and leader changes.
//
// # Lease pool
//
// A Locker keeps up to 64 spare leases, which hold no key, by their TTL in whole
// seconds: Unlock deletes the key and keeps its lease (when this Locker granted
// it) instead of revoking it, and a TryLock that finds its key held keeps the
// lease it brought. A TryLock takes the freshest spare of its whole seconds
// instead of granting a lease, so that an uncontended TryLock+Unlock pair costs
// two round trips (Txn, Txn), as a concurrency.Mutex on a shared Session does,
// while each held key still has a lease, and so an expiry, of its own. A ttl of
// other whole seconds grants a lease of its own. The Locker records for each of
// its leases the time taken before the request that last set its TTL (the grant,
// or a refresh by Renew); the lease's expiry is that time plus the TTL that the
// server reported, and a Lease's Expires is never later (a Lease on a spare may
// get up to a tenth of its ttl, at most a second, less than ttl; a spare older
// than that is refreshed with KeepAliveOnce first, one round trip). Spares that
// expire unused are dropped (the server deletes them); Close revokes every spare.
// A lease whose TryLock had an attempt with an unknown outcome is never kept: a
// late copy of that attempt could create the key on it after Unlock. The Locker
// records each of its acquisitions (key and fence) with its lease, the key's
// value and the revision of the put that put the key on that lease, so that Unlock
// checks the token against that value and its transaction compares only the key's
// mod revision with that revision (the key is unchanged since: the acquisition's,
// on that lease), and needs no PrevKV to learn the lease; a Lease from another
// Locker is released by its token, and its etcd lease revoked.
//
// # Keys
//
// A key is stored as Options.Prefix followed by the key's bytes, with '%', '/' and
// the ASCII control bytes written as %XX. The mapping is one to one, so keys that
// differ in any byte are different locks, and an encoded key never contains '/', so
// a key cannot reach into a deeper prefix (a Locker with prefix "app/" never touches
// the keys of one with prefix "app/a/"). The etcd value holds the holder's secret
// token, the whole seconds of its lease's ttl and its owner label (Options.Owner),
// which Inspect reports.
//
// # Time to live
//
// etcd leases have a TTL in whole seconds, and the server raises a TTL below its
// minimum (3/2 of the election timeout rounded up: 2s with etcd's defaults, 1s with
// an election timeout of at most 666ms). A ttl is therefore rounded up to whole
// seconds for the lease, while Lease.Expires is the request's start plus the ttl
// asked for, never more (a little less on a spare lease: see Lease pool). The key is freed at the latest when the lease expires:
// the lease's TTL after its last refresh, plus up to half a second for the server's
// expiry check, or soon after the lease's expiry when a Wait of an etcdlock
// Locker waits for it (see Failover). A leader change extends every lease: the new leader refreshes
// leases to their full TTL plus an election timeout.
//
// Renew never shortens what the server holds. With a ttl (in whole seconds) that is
// not longer than the TTL of the key's lease it refreshes that lease
// (a LeaseKeepAlive request), which then holds the key for its full TTL, while the returned
// Expires counts the ttl asked for. With a longer ttl it moves the key to a new
// lease of that ttl in one transaction; the Lease's Key, Token and Fence stay the
// same. Either way the server holds the key at least until the old Lease's Expires,
// whatever the outcome of the Renew (a lost reply included), so the old Expires is
// still a bound after a Renew that failed. The price: after a Renew with a shorter
// ttl, a holder that stops renewing keeps the key for up to the longer TTL.
//
// # Round trips
//
// TryLock: one (Txn) on a spare lease (see Lease pool); two (LeaseGrant or
// LeaseKeepAlive, Txn) when it has none of its whole seconds, or only an old one.
// Renew: two (LeaseKeepAlive, Range: etcd cannot make a lease refresh conditional
// on a key, so Renew confirms afterwards, linearizably, that the key is still on
// the refreshed lease) for an acquisition of this Locker whose etcd lease it
// knows; three (Range, LeaseKeepAlive, Range) for another Lease, or when that
// refresh fails; four (Range, LeaseGrant, Txn, LeaseRevoke) when the ttl is
// longer than the lease's. The Ranges of concurrent Renews share round trips:
// those queued while one is in flight go out together as one read-only Txn of up
// to 100 Gets (at most 4 in flight), which etcd serves as one linearizable read
// sent after each of their refreshes, so a Renew is still granted only on the
// quorum's word. The refreshes of a Locker share up to 16 LeaseKeepAlive streams,
// each request sent as soon as it comes (pipelined) and answered in order, with
// at most 8 waiting on a stream before another opens (etcd serves the keepalives
// of one stream one at a time), instead of a stream, a goroutine and several KiB
// per refresh in flight (KeepAliveOnce). A client whose Lease is not clientv3's
// own keeps KeepAliveOnce.
// Unlock: one (Txn); a lease that it does not keep is revoked in the background.
// Wait: a watch, which the Waits of a Locker on one
// key share and which stays for 2s after the last of them, and a Range unless a
// TryLock of the same Locker saw the key held since the watch started; while the
// holder's lease nears its expiry, the Waits of a Locker on a key share the
// LeaseTimeToLive probes of Failover (up to about a dozen when the holder is gone,
// then a Range and a LeaseRevoke; about 1 a second while a live holder renews),
// none when the key is handed on within half a second. Inspect: two
// (Range, LeaseTimeToLive).
//
// # Waits
//
// A deletion of a key wakes one Wait of a Locker on it, the one that waited
// longest (internal/waitq); the next one wakes only when the woken caller does not
// start a TryLock of the key within 20ms, or that TryLock fails other than by
// finding the key held. A release thus costs one TryLock per Locker whose callers
// wait for the key, not one per caller: 1,000 callers of distlock.Lock on 4
// Lockers send about 4 TryLocks per handoff (TestNoHerd).
//
// # Failover
//
// etcd's leader revokes expired leases only on a check that runs every 500ms, so
// the key of a holder that vanished stays up to 500ms past its lease's expiry. A
// Wait frees it sooner: while a Locker has Waits on a key held on an etcd lease of
// 2s or more, it asks the leader for that lease's remaining time
// (LeaseTimeToLive) as its expiry nears, and once it knows that the leader holds
// the lease expired it reads the key and revokes the lease (chase.go). The rules,
// each needed:
//
//   - LeaseTimeToLive reports the leader's remaining time truncated to whole
//     seconds: 0 means anything from -1s to 1s, so a lone 0 (or a TTL <= 0) proves
//     nothing. The lease has expired at the leader when a probe reports -1 or
//     less, or when a chain of probes that each report 0 spans more than a
//     second (the last one sent at least 1s after the first one's reply: the
//     first's 0 put the expiry before then) with no link (from one probe's sending
//     to the next one's reply) longer than the lease's TTL less 1s: a refresh
//     after a probe would leave more than 1s at the next one, which would report
//     1 or more. The probes of the chain and the read must be answered at one
//     raft term, as their headers say, each probe by a member whose previous
//     answer had that term already: its term did not change while it asked the
//     leader of that term (or was that leader).
//   - LeaseTimeToLive is not linearizable: a leader cut off from its peers
//     answers from its own lessor until it steps down, although a new leader may
//     hold the lease refreshed. So the revocation waits for a linearizable read
//     of the key, answered at the same term after the last probe: it shows the
//     key still on the lease, and that no leader of a later term existed when
//     the probes were answered (the read's quorum confirmed the term after
//     them), so the lessor that answered was the cluster's.
//   - A leader that holds a lease expired refuses to refresh it (it waits for
//     the revocation), but a new leader refreshes every lease that was not
//     revoked yet (by its TTL plus an election timeout), and the chase's
//     revocation may apply only after that, in the new term. The chase adds no
//     rule of its own for holders: it relies on the contract's rule that Renew
//     never revives a lease (a Renew that starts at or after the Lease's Expires
//     gives ErrNotHeld, and a refresh or move answered that late does not count:
//     see Renew), and on
//     TryLock counting a spare's refresh only when it was answered before the
//     spare's expiry (else it grants a new lease). Those bounds are no later
//     than the expiry at the leader of the probes' term: they count from before
//     the refresh was sent, by the ttl asked for, at most the lease's TTL (modulo
//     the clocks' drift; see Safety assumptions), and what an earlier, stale
//     leader refreshed, the next leader extended past (see Faults inside the
//     cluster). So once the probes show the lease expired at time T, every
//     refresh that counted was answered before T, and one answered after T, by
//     that leader or a new one, comes too late to count: no acquisition on that
//     lease (its key, or a later key on it as a spare) has an Expires past T or
//     ever gets one, and revoking the lease then, in any term and more than
//     once, frees only what no holder may still use.
//
// The cost, per Locker and key that Waits wait for: the first probe goes 2.5s
// before the holder's lease would expire, counted from when the holder was seen;
// up to about a dozen probes, a Range and a LeaseRevoke per vanished holder (they
// bisect the lease's expiry with probes 2s ahead of it while they can, then step
// towards it by 80ms, so that the chain's first probe comes soon after the
// leader's TTL drops below 1s), and about 1 probe a second while a live holder
// renews. A lease of 1s (the minimum TTL with an election timeout of at most
// 666ms) is not chased: a 0 then cannot tell a refresh from none. With a client
// of several endpoints the probes may go to members whose previous answers do not
// bracket them yet, which costs a probe or two more.
//
// # Loss
//
// Lost and AfterLost of every acquisition of a Locker share one watch of its
// prefix, which closes Lost's channel and starts AfterLost's functions once the
// key is deleted or created anew after the Fence (or this Locker's Unlock released
// it); Close does both for every acquisition watched. The watch starts with the
// first acquisition asked about and ends 2s after the last one is gone. An
// acquisition whose Fence is older than the events the watch already passed on,
// and every acquisition when the watch must start anew (its history was
// compacted, or the server cancelled it), is checked by a linearizable read of its
// key, batched with others, so no loss is missed. Hold uses AfterLost, so it
// keeps no goroutine of its own per lease: 10,000 Holds on a Locker keep one
// watch, not 10,000.
//
// # Errors and cleanup
//
// Every error of a Locker's methods is an *distlock.OpError with Backend
// "etcdlock", the method's name as Op, the key, and the cause, which wraps
// distlock.ErrLocked, ErrNotHeld, ErrInvalid or ErrClosed, a context error, or
// the transport's error (never ErrLocked). New's errors are OpErrors of Op "New".
// When a TryLock
// fails after its lease was granted (other than by finding the key held), or its
// reply comes after the ttl, the lease is revoked with a fresh context bounded by
// Options.CleanupTimeout (never the caller's, which may be the reason for the
// failure): revoking the lease removes a key that a request whose outcome is
// unknown may have created. The call waits for that cleanup only while the
// caller's context lives, so it still returns promptly when that context ends. A
// Renew whose outcome is unknown revokes nothing (see Time to live), and one whose
// reply comes after its ttl returns an error, not an expired Lease.
//
// # Close
//
// Close stops the Locker's background work and waits for it: the watches that
// Waits share and the one that Lost keeps, the calls in flight (cancelled: they return
// ErrClosed, and the lease revocations that their failures start still run,
// bounded by Options.CleanupTimeout), and the Locker's spare leases, which it
// revokes. It closes every Lost channel. It never closes the clientv3.Client and
// releases no held lease: those stay held until their ttl.
//
// # Faults inside the cluster
//
// Each request is bounded by Options.RequestTimeout and requires a leader
// (clientv3.WithRequireLeader: a member that knows it has none refuses at once).
// An attempt that times out or fails with Unavailable (no leader, a broken
// connection, a proposal that a member forwarded to a leader that died and then
// timed out) is tried again, until the call's context ends or five request
// timeouts have passed; clientv3's balancer sends each attempt to its next
// endpoint. So when a member dies, a call moves on to a live one: on a 3-member
// cluster, an Unlock with the leader killed or paused takes at most two request
// timeouts (one on a follower whose proposal went to the dead leader, one on the
// dead member). Every request is safe to repeat: a TryLock recognizes the
// key that its earlier attempt created by its token, a Renew the key that its
// earlier attempt moved, and an Unlock that finds the key gone after an attempt
// whose reply was lost says ErrNotHeld. A member that falls silent without closing
// its connections (a machine that lost power, a paused process) stays in the
// balancer until gRPC keepalive notices: set clientv3.Config.DialKeepAliveTime and
// DialKeepAliveTimeout (say 2s and 1s) so that it costs at most one timeout.
//
// A member cut off from its peers while its clients still reach it cannot extend
// a lease: Renew (before and after its refresh), Inspect and Wait's check read the
// key linearizably, which needs a quorum, so they fail and the Lease's Expires
// stays as it was.
// etcd 3.6 does not give that guarantee for keepalives alone: its leader checks its
// leadership before a renewal only when its raft ticks have stalled
// (ensureLeadership), so an isolated leader still accepts LeaseKeepAlive until
// CheckQuorum makes it step down, within two election timeouts (measured: about
// 0.6s with an election timeout of 600ms). What it renews then is void: the other
// members elect a leader no sooner than an election timeout after the isolation,
// which extends every lease by its TTL plus an election timeout, past any Expires
// that etcdlock returned. A Wait whose member cannot read the key returns an error
// within the request timeout (distlock.Lock then backs off), and its watch, which
// requires a leader, ends when the member has had none for three election
// timeouts. Leader changes and a minority of members that lose their data and
// rejoin empty (member remove and add) keep every lease: leases live in the
// replicated log, and the new leader extends them.
//
// # Safety assumptions
//
// A lock is only as safe as the cluster that keeps it. Each assumption names what
// breaks when it does not hold, and what etcdlock does or how to check it:
//
//   - Quorum: a majority of the members is up and connected: without one no
//     TryLock, Renew or Unlock succeeds, and holders lose their leases at Expires
//     (nothing unsafe); every request requires a leader
//     (clientv3.WithRequireLeader) and reads are linearizable, so a member cut off
//     from the majority serves nothing stale. Watch the cluster's health
//     (etcdctl endpoint status).
//   - Durability: members fsync their log before they acknowledge (never run with
//     --unsafe-no-fsync), and no more than a minority loses its data at once: a
//     majority that loses acknowledged writes forgets locks (two holders) and
//     moves the revision back (fences repeat); restore a snapshot only with
//     etcdutl snapshot restore --bump-revision and --mark-compacted, by more than
//     the writes the snapshot lacks.
//   - The prefix: nothing else writes under Options.Prefix. A client that deletes
//     or rewrites a lock key frees or steals it (a key revoked or deleted from
//     outside is reported through Lost and Renew's ErrNotHeld); give each
//     application its own prefix, and restrict it with etcd's RBAC.
//   - Clocks: lease expiry runs on the leader's monotonic clock, Expires on the
//     client's, and the two run at the same rate (drift of a few parts per
//     million): a leader whose clock runs fast can free a key before the
//     holder's Expires (etcdlock has no drift allowance, only the rounding of
//     ttl up to whole seconds). A Wait's chase (see Failover) reads the
//     leader's remaining time against the waiter's clock, with 5ms to spare
//     over about 2s. Wall-clock steps do not matter. A holder that
//     pauses (GC, a stopped VM) past its Expires must assume the lease lost; use
//     the Fence.
//   - Every Locker on the prefix runs an etcdlock whose Renew never revives a
//     lease (this version or later): a Wait revokes a holder's lease that the
//     leader holds expired, which is safe only because its holder can no longer
//     extend it (see Failover). An older etcdlock holder could renew a lease
//     that a new leader revived after a Wait's probes saw it expired, and lose
//     its key before its Expires.
//   - Lease expiry: the server keeps a lease for at least its granted TTL after
//     its grant or last refresh (a new leader extends every lease, never
//     shortens one): a server that expired leases early would free keys before
//     the holders' Expires; etcdlock counts Expires from the smaller of the ttl
//     asked for and the TTL that the server reports. A ttl below the members'
//     minimum lease TTL (3/2 of the election timeout) holds the key up to that
//     minimum: safe, but others wait longer.
package etcdlock
