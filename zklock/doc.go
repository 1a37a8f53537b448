// Package zklock is a distlock backend on Apache ZooKeeper (3.5 or later), using
// go-zookeeper/zk: the classic lock recipe of ephemeral-sequential nodes.
//
//	conn, _, err := zk.Connect(servers, 10*time.Second)
//	...
//	l, err := zklock.New(conn, &zklock.Options{SessionTimeout: 10 * time.Second})
//	...
//	defer l.Close()
//	lease, err := distlock.Lock(ctx, l, "nightly-report", 10*time.Second, nil)
//
// # Layout
//
// Every key has a container node under Options.Root (default /distlock), named by the
// base64url encoding of the key's bytes, so that every key, whatever its bytes, maps
// to exactly one safe name and distinct keys to distinct names. ZooKeeper removes a
// container once it is empty. An acquisition creates an ephemeral-sequential child
//
//	/distlock/<base64url(key)>/_c_<id>-lock-0000000042
//
// whose data is Options.Owner. _c_<id>- is the "protected" prefix of the ZooKeeper
// recipes: id is 128 random bits, so a client whose create lost its reply (the
// connection broke) finds its node again by id — and uses it or deletes it — instead of
// leaving an orphan that would block the key for the rest of its session. The lowest
// sequence number holds the lock. Children that are not protected lock nodes are
// foreign and ignored; protected lock nodes of Curator's InterProcessMutex and of
// go-zookeeper's zk.Lock ("_c_<id>-lock-<seq>") are contenders too, so those locks on
// the same node exclude each other.
//
// # What ttl means here
//
// ZooKeeper has no per-lock expiry: a lock node lives until it is deleted (Unlock) or
// its session ends (the client closed its connection, or the leader heard nothing of
// it for the session timeout). Capabilities: the key is freed by session expiry, not by
// ttl. The ttl of TryLock and Renew only bounds the lease's local validity:
//
//	Expires = start + min(ttl, SessionTimeout - SessionTimeout/3 - TickTime/2)
//
// where start is taken before the request is sent, and TickTime defaults to
// SessionTimeout/2 (so the cap is 5/12 of the session timeout; with TickTime set to
// the servers' actual tick it is longer, 1.23s of a 2s session on 200ms ticks). Renew
// changes nothing on the server: it proves that the session is alive, through the
// leader, and returns a lease with a new Expires. So a ttl above the cap buys nothing;
// with distlock.Hold, keep the default HoldOptions.TTL (the lease's remaining time), so
// that renewals come every third of it.
//
// A lease that is simply not renewed keeps the key locked while its session lives;
// Unlock it. Leases that are watched through Lost (distlock.Hold does) are also
// deleted by the Locker once Expires passes without a renewal.
//
// # How long a lease is held
//
// Only the leader expires sessions: it sets a session's deadline to the time it hears
// of the session plus the session timeout (rounded up to a tick); a new leader gives
// every session a full timeout from its election. A client connected to a follower
// is heard of only indirectly: the follower notes every session that sends it
// anything (a request or a ping) and reports the sessions it noted in its answer to
// the leader's ping, which comes every tickTime/2 (LearnerSessionTracker's touch
// table, Learner.ping). A request that the follower forwards to the leader extends
// nothing there: the leader only checks that the session exists. go-zookeeper pings
// every third of the session timeout.
//
// TryLock's create and Renew's check (a version check of the lock node, committed as a
// transaction that changes nothing and fails if the node is gone) are writes: the
// follower forwards them to the leader and they succeed only once a quorum has
// committed them. So when one succeeds:
//
//   - The leader that committed it had a quorum after start, and any later leader was
//     elected after that (its quorum includes a server that acknowledged the write),
//     so it cannot expire the session before start + SessionTimeout.
//   - The follower's connection to that leader delivered, in order, everything the
//     follower sent before forwarding the request, which reached the follower after
//     start. That includes its answer to the leader's last ping before it, at most
//     tickTime/2 earlier, which reported every session heard since the answer before;
//     this client had sent something at most SessionTimeout/3 before that answer. So
//     the leader heard of the session at start - SessionTimeout/3 - tickTime/2 or
//     later, and expires it no earlier than SessionTimeout after that: Expires.
//
// A read proves neither, which is why Renew writes. A follower cut off from the leader
// answers reads from its own copy until it notices, syncLimit ticks later (10s with
// tickTime 2s), while the leader expires the session and another client takes the
// key; a deposed leader (cut off, or paused) answers even a Sync itself until it
// steps down. A write fails in both cases: the cut-off server cannot get it
// committed.
//
// The client cannot read tickTime. A server grants no session timeout below its
// minSessionTimeout, 2 ticks unless configured, hence the default TickTime of
// SessionTimeout/2; set Options.TickTime if the servers allow shorter sessions. The
// argument assumes, as ZooKeeper does, that the clocks of client and leader run at the
// same rate and that network delays vary little next to the session timeout (pings
// arrive about as often as they are sent). Options.SessionTimeout must not exceed the
// timeout the server granted (a larger grant only lengthens the real bound).
//
// # Fencing
//
// The Fence is the lock node's czxid: the id of the transaction that created it.
// Transaction ids increase strictly across the whole ensemble, across leader changes
// (the epoch is their high 32 bits) and restarts, so a later acquisition of a key
// always has a larger Fence.
//
// # Connection loss: SUSPENDED and LOST
//
// When the connection to ZooKeeper drops, the client cannot know whether its session
// survives (Curator calls this SUSPENDED); the session is LOST once the server expired
// it. Lost (distlock.LossNotifier) closes a lease's channel in both cases — for a
// suspension after Options.DisconnectGrace, which is zero by default, as Curator's
// default error policy treats SUSPENDED like LOST — so that distlock.Hold stops the
// protected work at once. A lease reported lost is dead for good: the Locker deletes
// its node when the connection comes back with the session intact, so that nobody
// holds the key without knowing it. Set DisconnectGrace to ride out short
// disconnections (a leader election takes a second or two); the lease's Expires bounds
// it in any case.
//
// The Locker observes the session by polling conn.State and conn.SessionID (cheap
// atomic loads) while some lease is watched, so it works with any *zk.Conn and leaves
// zk.Connect's event channel to the caller.
//
// # Contexts
//
// go-zookeeper's requests take no context. Every method returns as soon as its
// context is done; a request it abandoned finishes in the background, and a TryLock
// whose caller gave up deletes the node it may have created, with retries that last
// until the node is gone or its session ended — never an orphan.
//
// # Waiting
//
// Wait (distlock.Waiter, which distlock.Lock uses) queues up with an ephemeral-sequential
// waiter node (_w_<id>-wait-lock-<seq>, not a contender: it never blocks TryLock) and
// watches one node only: the waiter just before it, or, at the head of the queue, the
// holder's lock node. A release wakes the head alone, not every waiter (no herd), and
// waiters take their turns in order. The head's waiter node stays until its Locker's
// next TryLock of the key has created its lock node, so that the next waiter moves up
// only then (or after a second, if that TryLock never comes).
//
// # Consistency
//
// A ZooKeeper server answers reads from its own copy, which may lag the leader; the
// lowest-node test is still exact, because a client's read follows its own write, and
// a node created before ours is seen by any server that has applied ours. Searches for
// a node whose create lost its reply (the connection broke, and the create may still
// be on its way to the leader) Sync first, so that the server has applied every change
// that the leader had ordered before the Sync. Renew does not trust a read at all (see
// "How long a lease is held").
package zklock
