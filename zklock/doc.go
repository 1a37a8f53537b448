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
// its session ends (the client closed its connection, or the server heard nothing from
// it for the session timeout). Capabilities: the key is freed by session expiry, not by
// ttl. The ttl of TryLock and Renew only bounds the lease's local validity:
//
//	Expires = start + min(ttl, Options.SessionTimeout)
//
// where start is taken before the request is sent. The server expires the session no
// earlier than the session timeout after it last heard from the client, which was no
// earlier than start, so Expires never outlives the session. Renew sends one read of the
// lock node: it proves that the session is alive and that the node still belongs to
// it, and returns a lease with a new Expires; it changes nothing on the server. So a
// ttl above the session timeout buys nothing; with distlock.Hold, keep the default
// HoldOptions.TTL (the lease's remaining time) or a TTL of at most three times the
// session timeout, so that a renewal comes before Expires.
//
// A lease that is simply not renewed keeps the key locked while its session lives;
// Unlock it. Leases that are watched through Lost (distlock.Hold does) are also
// deleted by the Locker once Expires passes without a renewal.
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
// a node created before ours is seen by any server that has applied ours. Renew's read
// can be served by a follower that has lost the leader but not noticed it yet (for up
// to syncLimit ticks); Expires keeps counting from before the request either way.
package zklock
