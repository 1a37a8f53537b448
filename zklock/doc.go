// Package zklock is a distlock backend on Apache ZooKeeper (3.5 or later), using
// go-zookeeper/zk: the classic lock recipe of ephemeral-sequential nodes.
//
//	sess, err := zklock.Connect(ctx, servers, 10*time.Second, nil)
//	...
//	defer sess.Close()
//	l, err := zklock.New(sess, nil)
//	...
//	defer l.Close()
//	lease, err := distlock.Lock(ctx, l, "nightly-report", sess.Timeout(), nil)
//
// # Sessions and the granted timeout
//
// A Locker's leases live in one ZooKeeper session, and how long a lease is certainly
// held depends on the session timeout (see "How long a lease is held"). The server
// decides it: it clamps the timeout the client asks for to its [minSessionTimeout,
// maxSessionTimeout] (by default 2 and 20 ticks: 4s to 40s). A *zk.Conn does not
// tell the granted value, so a Locker is not built on a *zk.Conn but on a Session,
// which Connect makes: Connect waits for the session and reads the granted timeout
// from the server's handshake answer (its dialer's connections read the first frame
// each server sends, ZooKeeper's ConnectResponse). No option sets the timeout, so a
// Locker cannot count on a longer one than the server granted. Session.Timeout
// reports it; Session.Conn gives the *zk.Conn for other uses.
//
// Every reconnection is a new handshake, and a server with other session timeout
// settings than the first may grant another value, which then governs the session.
// The Session records every grant, and its Lockers count leases with the smallest
// timeout it was ever granted (and the ping interval of the largest); a reconnection
// that is granted less than before closes the Lost channel of every lease counted
// with more (distlock.Hold then stops its work). A lease that is not watched through
// Lost keeps the Expires it was given: give every server of an ensemble the same
// minSessionTimeout and maxSessionTimeout, as is usual, and no grant ever changes.
//
// # Layout
//
// Every key has a container node under Options.Prefix (default /distlock), named by the
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
//	Expires = start + min(ttl, S - S/3 - TickTime/2)
//
// where S is the granted session timeout, start is taken before the request is sent,
// and TickTime defaults to S/2 (so the cap is 5/12 of the session timeout; with
// TickTime set to the servers' actual tick it is longer, 1.23s of a 2s session on
// 200ms ticks). Renew changes nothing on the server, so it never shortens anything
// there: it proves that the session is alive, through the leader, and returns a lease
// with a new Expires. So a ttl above the cap buys nothing; with distlock.Hold, keep
// the default HoldOptions.TTL (the lease's remaining time), so that renewals come
// every third of it.
//
// A lease that is simply not renewed keeps the key locked while its session lives;
// Unlock it (a Renew after its Expires fails with ErrNotHeld, without asking the
// server, and deletes the node of a lease that this Locker's TryLock returned). Leases that are watched through Lost (distlock.Hold does) are also
// deleted by the Locker once Expires passes without a renewal (a Renew whose answer
// comes after that fails with ErrNotHeld), and after Close the Locker deletes the
// node of every lease it still holds once that lease's Expires has passed.
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
//     so it cannot expire the session before start + S.
//   - The follower's connection to that leader delivered, in order, everything the
//     follower sent before forwarding the request, which reached the follower after
//     start. That includes its answer to the leader's last ping before it, at most
//     tickTime/2 earlier, which reported every session heard since the answer before;
//     this client had sent something at most S/3 before that answer. So the leader
//     heard of the session at start - S/3 - tickTime/2 or later, and expires it no
//     earlier than S after that: Expires.
//
// A read proves neither, which is why Renew writes. A follower cut off from the leader
// answers reads from its own copy until it notices, syncLimit ticks later (10s with
// tickTime 2s), while the leader expires the session and another client takes the
// key; a deposed leader (cut off, or paused) answers even a Sync itself until it
// steps down. A write fails in both cases: the cut-off server cannot get it
// committed.
//
// Here S is the session timeout that the server granted (see "Sessions and the
// granted timeout"): the leader counts with it. The client cannot read tickTime. A
// server grants no session timeout below its minSessionTimeout, 2 ticks unless
// configured, hence the default TickTime of S/2; set Options.TickTime if the servers
// allow shorter sessions. The argument assumes, as ZooKeeper does, that the clocks of
// client and leader run at the same rate and that network delays vary little next to
// the session timeout (pings arrive about as often as they are sent).
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
// holds the key without knowing it, but not before the lease's Expires, so that
// nobody else takes the key while a holder that did not heed Lost counts on it. Set
// DisconnectGrace to ride out short disconnections (a leader election takes a second
// or two); the lease's Expires bounds it in any case.
//
// AfterLost (distlock.LossWatcher, which distlock.Hold uses) runs a function when
// Lost's channel would close, with no goroutine per lease: the lease's
// subscription keeps the function, and whatever ends the lease starts it.
//
// The Locker observes the session by polling the connection's State and SessionID
// (cheap atomic loads) while some lease is watched, and leaves go-zookeeper's events
// to the caller (ConnectOptions.ZK can pass zk.WithEventCallback).
//
// # Contexts and cleanup
//
// TryLock, Renew, Unlock and Inspect run on driver.Locker, the core that every
// backend shares: it validates, counts Expires from before the request, refuses
// late replies, retries a TryLock whose create was not sent (or whose session had
// expired) on its one schedule, and wraps every error. go-zookeeper's requests take
// no context. Every method returns as soon as its context is done; a request it
// abandoned finishes in the background, and a TryLock whose caller gave up deletes
// the node it may have created (as does an Unlock whose outcome is unknown), with
// retries that last until the node is gone or its session ended — never an orphan.
// So there is no Options.CleanupTimeout here, unlike the backends whose locks expire
// by ttl: an ephemeral node of a live session never expires, and a cleanup that
// gave up after a fixed time would leave the key locked for the rest of the session
// (a quorum loss can outlast the session timeout without ending the session: a new
// leader gives every session a full timeout from its election). The retries stop
// when the Session's connection is closed (the session's end deletes the nodes),
// and not before, also after Locker.Close.
//
// # Close
//
// Close has the core's meaning (see driver.Locker.Close), with what an ephemeral
// node adds. Calls in flight (TryLock, Renew, Unlock, Inspect, Wait) return at once
// with an error wrapping distlock.ErrClosed, unless they were done; a TryLock cut
// short deletes what its attempt takes, and an Unlock cut short deletes its node,
// in the background. Every Lost channel closes. Held leases are not released at
// once: each stays held until its Expires, as if its holder had crashed; then,
// since the Session lives on and a ZooKeeper lock has no ttl, the Locker deletes
// its node, in the background. Waiter nodes are deleted at once. The deletions
// retry until each node is gone or its session has ended, for as long as the
// Session's connection is open: a key is free again a round trip after its lease's
// Expires while the ensemble serves, or once it serves again after a quorum loss,
// however long. Close returns at once, without waiting for the server, and never
// closes the Session; closing the Session frees every key of its session at once
// and ends the background work. Every call after Close returns an error wrapping
// distlock.ErrClosed; a second Close returns nil.
//
// # Errors
//
// Every error that a method returns is a *distlock.OpError with Backend "zklock", Op
// the method's name and Key the key; Connect's and New's have Op "Connect" and "New".
// Test the cause with errors.Is: distlock.ErrLocked, ErrNotHeld, ErrInvalid,
// ErrClosed, a context error, or a go-zookeeper error such as zk.ErrNoServer or
// zk.ErrConnectionClosed (the outcome of the call is then unknown). A request whose
// write failed (go-zookeeper hands it the connection's own error, such as
// "connection reset by peer") is reported as zk.ErrConnectionClosed too, wrapping
// that error, and the background deletions retry it as any broken connection.
//
// # Waiting
//
// Wait (distlock.Waiter, which distlock.Lock uses) queues up with an ephemeral-sequential
// waiter node (_w_<id>-wait-lock-<seq>, not a contender) and watches the waiter node
// just before its own (the holder's node at the head), so a release wakes one
// waiter alone, not every waiter, and waiters take their turns in order (no herd:
// TestNoHerd counts about 5 requests per handoff among 1,000 waiters).
//
// With Options.WaitContends, each of the first 3 waiters of the queue also makes a
// lock node while it waits (a contender queued behind the holder, as zk.Lock's
// waiters are) and watches the few contenders before it; a waiter further back
// watches the waiter node 3 places before its own (about 8 requests per handoff
// among 1,000 waiters). A waiter whose lock node becomes the
// lowest holds the lock: Wait returns, and its Locker's next TryLock of the key
// takes the lease over without a request (Expires counts from before that lock
// node's create, or from a fresh check write if less than half the validity is
// left), so that a handoff costs no round trip after the release's watch event. The
// waiter's nodes stay until that TryLock comes (or a second, if it never comes:
// then nobody holds the key meanwhile, and Inspect reports that node). So it is
// off by default: a caller of Wait that does not TryLock at once (election's
// Observe) would hold others back.
//
// # Round trips
//
// An uncontended TryLock is one multi request: the lock node's create and a setData of
// the key node, whose returned stat gives the Fence (its mzxid is the transaction's
// zxid: the lock node's czxid) and the key node's numChildren: 1 means that the lock
// node is the only child, so it holds the lock without a listing. With its Unlock
// (a delete), a pair is 2 round trips, against zk.Lock's 3 (create, listing,
// delete); a fresh key adds the key node's create (4). A TryLock that finds company
// lists the children in the same round trip. A key node that grants no write
// (another client made it with its own ACL) makes the multi fail: TryLock then falls
// back to a plain create, and reads the Fence with the listing. The setData writes
// the key node's data, which is empty, as empty.
//
// Renewals of many leases share round trips and transactions: ZooKeeper commits
// every write, even a check that changes nothing, as a transaction of its own
// (logged and synced), so the cost of many Renews is server writes more than round
// trips (go-zookeeper pipelines requests on its connection anyway). The checks of
// concurrent Renews of one Locker go as one multi (group commit: at most 2 multis
// in flight, up to 1,000 checks each, the checks that come meanwhile wait for the
// next), which is one transaction. A multi that fails names its first failed
// check: that lease gets its answer (its node is gone: ErrNotHeld), and the other
// checks go again, in two halves at once, so each lease's answer is that of a check
// of its own. A lease that this Locker's TryLock returned needs no read beside its
// check: its node's path names its acquisition (128 random bits), so the node's
// owner session and czxid are those that TryLock saw. With 10,000 leases under
// distlock.Hold, that is about 0.03 requests per renewal instead of 2, and no
// goroutine per lease (Lost's subscriptions run AfterLost's functions, see
// distlock.LossWatcher).
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
//
// # Safety assumptions
//
// A lock is only as safe as the ensemble that keeps it and the session bound that
// Expires is counted with. Each assumption below names what breaks when it does not
// hold, and what zklock does about it or how to check it:
//
//   - Durability: a majority of the ensemble keeps its data, with forceSync=yes
//     (ZooKeeper's default: the transaction log is synced before a write is
//     acknowledged). If a majority loses acknowledged writes (forceSync=no and a
//     power loss, wiped disks), lock nodes vanish while held (two holders) and, if
//     every server starts empty, czxids start over (fences repeat). A minority that
//     loses its data rejoins and catches up from the others: the suite's LoseMinority
//     fault tests it. Check zoo.cfg.
//   - Session timeout settings: every server of the ensemble has the same
//     minSessionTimeout and maxSessionTimeout. Otherwise a reconnection can be
//     granted a shorter timeout than the one a lease's Expires was counted with, and
//     the leader may expire the session (and another client take the key) before
//     that Expires. The Session notices every grant: later leases count with the
//     smallest, and Lost closes for the leases counted with more (see "Sessions and
//     the granted timeout"); a lease nobody watches keeps its Expires.
//   - Tick: Options.TickTime is at least the servers' tickTime. Its default, half the
//     granted timeout, is sound while minSessionTimeout is at least 2 ticks
//     (ZooKeeper's default). If it is smaller than the real tick, the leader may hear
//     of the session later than Expires assumes, and expire it before Expires (two
//     holders). Check tickTime and minSessionTimeout in zoo.cfg.
//   - Clocks and delays: the clocks of client and leader run at the same rate, and
//     pings between follower and leader arrive about as often as they are sent, as
//     ZooKeeper itself assumes. A clock that runs fast on the leader, or a link that
//     holds pings back for a large part of the session timeout, expires sessions
//     before the client's Expires (two holders); nothing in zklock detects it. Keep
//     clocks disciplined (NTP slewing). A client that pauses (GC, a stopped VM) past
//     its Expires must assume the lease lost: that is what Expires and fences are
//     for.
//   - Session's life: the nodes that the Locker deletes in the background (those
//     of a closed Locker's leases, of a lease reported lost, of a cancelled TryLock, of an
//     Unlock whose outcome was unknown) are deleted once the ensemble answers, at
//     the latest when the session ends: the deletion retries for as long as the
//     Session's connection is open, because ZooKeeper keeps an ephemeral node until
//     then and a quorum loss does not end a session (a new leader gives every
//     session a full timeout). A Session that is never closed, and whose ensemble
//     never serves again, keeps its nodes and these retries (at most one request a
//     second each) for as long as it lives; nothing else does. Close the Session
//     when its Lockers are done: that frees every key of its session.
//   - Exclusive use of the Prefix: no other client deletes or creates lock nodes
//     under Options.Prefix except through this recipe (zk.Lock and Curator's
//     InterProcessMutex take part in it). A client that deletes a lock node frees
//     the lock while it is held (two holders). Restrict writes with Options.ACL.
package zklock
