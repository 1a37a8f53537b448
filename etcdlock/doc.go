// Package etcdlock is a distlock backend on etcd v3 leases
// (go.etcd.io/etcd/client/v3).
//
// Each acquisition grants its own etcd lease and creates the lock key with it in one
// transaction that succeeds only if the key does not exist. The key lives exactly as
// long as the lease: Unlock deletes it, and the server deletes it when the lease
// expires, by the server's clock. The Fence is the key's create revision, which the
// cluster's revision makes strictly increasing, across clients, server restarts and
// leader changes.
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
// asked for, never more. The key is freed at the latest when the lease expires:
// the lease's TTL after its last refresh, plus up to half a second for the server's
// expiry check. A leader change extends every lease: the new leader refreshes
// leases to their full TTL plus an election timeout.
//
// Renew never shortens what the server holds. With a ttl (in whole seconds) that is
// not longer than the TTL of the key's lease it refreshes that lease
// (KeepAliveOnce), which then holds the key for its full TTL, while the returned
// Expires counts the ttl asked for. With a longer ttl it moves the key to a new
// lease of that ttl in one transaction; the Lease's Key, Token and Fence stay the
// same. Either way the server holds the key at least until the old Lease's Expires,
// whatever the outcome of the Renew (a lost reply included), so the old Expires is
// still a bound after a Renew that failed. The price: after a Renew with a shorter
// ttl, a holder that stops renewing keeps the key for up to the longer TTL.
//
// # Round trips
//
// TryLock: two (LeaseGrant, Txn); one (Txn) when it uses the lease that the
// Locker's previous TryLock, which found a key held, kept (see TryLock).
// Renew: two (Range, LeaseKeepAlive); four when the ttl is longer than the lease's.
// Unlock: two (Txn, LeaseRevoke). Wait: a watch, which the Waits of a Locker on one
// key share and which stays for 2s after the last of them, and a Range unless a
// TryLock of the same Locker saw the key held since the watch started. Inspect: two
// (Range, LeaseTimeToLive).
//
// # Errors and cleanup
//
// A transport failure is returned as is (it never wraps ErrLocked). When a TryLock
// fails after its lease was granted (other than by finding the key held), or its
// reply comes after the ttl, the lease is revoked with a fresh context bounded by
// Options.CleanupTimeout (never the caller's, which may be the reason for the
// failure): revoking the lease removes a key that a request whose outcome is
// unknown may have created. The call waits for that cleanup only while the
// caller's context lives, so it still returns promptly when that context ends. A
// Renew whose outcome is unknown revokes nothing (see Time to live), and one whose
// reply comes after its ttl returns an error, not an expired Lease.
//
// # Faults inside the cluster
//
// Each request is bounded by Options.RequestTimeout and requires a leader
// (clientv3.WithRequireLeader: a member that knows it has none refuses at once). An
// attempt that times out or fails with Unavailable (no leader, a broken
// connection, a proposal that a member forwarded to a leader that died and then
// timed out) is tried again, until the call's context ends or five request
// timeouts have passed; clientv3's balancer sends each attempt to its next
// endpoint. So when a member dies, a call moves on to a live one: measured on a
// 3-member cluster, an Unlock with the leader killed or paused takes at most two
// request timeouts (one on a follower whose proposal went to the dead leader, one
// on the dead member), where it used to fail or wait until its context ended while
// the key stayed held. Every request is safe to repeat: a TryLock recognizes the
// key that its earlier attempt created by its token, a Renew the key that its
// earlier attempt moved, and an Unlock that finds the key gone after an attempt
// whose reply was lost says ErrNotHeld. A member that falls silent without closing
// its connections (a machine that lost power, a paused process) stays in the
// balancer until gRPC keepalive notices: set clientv3.Config.DialKeepAliveTime and
// DialKeepAliveTimeout (say 2s and 1s) so that it costs at most one timeout.
//
// A member cut off from its peers while its clients still reach it cannot extend
// a lease: Renew (and Inspect, and Wait's check) read the key linearizably first,
// which needs a quorum, so they fail and the Lease's Expires stays as it was.
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
package etcdlock
