package benchmarks

// Facts are what users compare besides speed, per row of the matrix, as each
// backend's package documentation states them (for the peers: as their
// documentation and code show them). Subject matches a Subject's Name.
type Facts struct {
	Subject string
	// Consistency is the consistency model: what the lock rests on and what can
	// break mutual exclusion.
	Consistency string
	// Fence is where the fencing token comes from ("none" when there is none).
	Fence string
	// AutoRelease says what frees the key when its holder crashes, and how fast;
	// the matrix adds W3's measurement.
	AutoRelease string
	// Wakeup is how a waiter learns that the key was released.
	Wakeup string
	// Expiry says whether the expiry is per lock (a ttl) or per session, and what
	// a renewal does to it.
	Expiry string
	// Needs is what it takes to run.
	Needs string
	// Safe is what the lock assumes of its servers and clocks.
	Safe Safety
}

// Safety is what a lock assumes, topic by topic, in one form for every row: the
// setting or condition the lock is safe under, and what breaks otherwise. For
// our backends it is the "Safety assumptions" of the package's documentation.
// An empty topic does not apply.
type Safety struct {
	Eviction    string // the server evicting lock or fence keys
	Persistence string // crashes and restarts: what the servers must keep
	Failover    string // replication, failover, quorum
	Clocks      string // clock rates and jumps, pauses
	Timeouts    string // ttls, session timeouts, what Renew does
	Other       string // anything else the lock needs to be safe
}

// oneRedis are the assumptions of a lock on one Redis master (with Sentinel or
// Cluster): redislock's, and its peers'.
var oneRedis = Safety{
	Eviction:    "maxmemory-policy noeviction (volatile-*: lock keys evicted, two holders; allkeys-*: fence counters too)",
	Persistence: "appendonly yes, appendfsync always (appendonly no: a restart frees every lock and resets fences; everysec: a machine crash loses the last second)",
	Failover:    "none, or accept its risk: replication is asynchronous, so a promoted replica can lack a lock just taken (two holders) and step a fence back; WAIT does not close this",
	Clocks:      "the server's clock does not jump forward (NTP slewing); expiry is on the server's clock",
}

// AllFacts lists the facts of every backend and peer, in matrix order.
var AllFacts = []Facts{
	{
		Subject:     "memlock",
		Consistency: "one process: a mutex over a map (not distributed)",
		Fence:       "in-memory counter per key (restarts with the process)",
		AutoRelease: "at ttl (the lease's Expires); a crash takes every holder with it anyway",
		Wakeup:      "channel, closed on release or expiry (Waiter)",
		Expiry:      "per lock (ttl)",
		Needs:       "nothing: for tests and examples",
		Safe: Safety{
			Persistence: "none: the state lives in the process",
			Failover:    "none: excludes goroutines of one process only",
			Clocks:      "the process's monotonic clock",
		},
	},
	{
		Subject:     "redislock",
		Consistency: "one Redis master (single, Sentinel or Cluster); replication is asynchronous, so a failover can lose a lock just taken (two holders) and step a fence back",
		Fence:       "INCR of a per-key counter in the acquire script (survives restarts with appendfsync always)",
		AutoRelease: "at ttl (SET PX, by the server's clock)",
		Wakeup:      "pub/sub on the key's release channel, bounded by the holder's remaining PTTL (Waiter)",
		Expiry:      "per lock (ttl in ms); Renew never shortens it (PEXPIRE only to a longer time)",
		Needs:       "Redis >= 2.6 (scripts), go-redis v9",
		Safe: Safety{
			Eviction:    oneRedis.Eviction + "; Locker.CheckServer reports it",
			Persistence: oneRedis.Persistence + "; CheckServer reports both",
			Failover:    oneRedis.Failover + "; CheckServer reports replicas",
			Clocks:      oneRedis.Clocks,
			Timeouts:    "ttl rounded up to whole ms, counted before the request; a reply after the ttl is an error, not an expired lease",
			Other:       "no proxy or network holds a request for more than 5 minutes: a TryLock that arrives later than that after its abandoned attempt's cleanup holds the key for its ttl under no one's token (each abandoned attempt leaves a 5-minute marker key)",
		},
	},
	{
		Subject:     "redlock",
		Consistency: "a quorum (N/2+1) of N independent Redis masters; safe under bounded clock drift while fewer than a quorum lose their data within Options.MaxTTL (a master that comes back empty is detected and kept out of quorums)",
		Fence:       "per-master counters that a quorum agrees on (quorum read, quorum write), with an era that jumps by 2^40 after a master lost its data",
		AutoRelease: "at ttl on each master; the lease's validity is ttl - elapsed - drift",
		Wakeup:      "pub/sub on every master (Waiter)",
		Expiry:      "per lock (ttl up to Options.MaxTTL, default 1m); Renew never shortens it (PEXPIRE only to a longer time)",
		Needs:       "N (3 or 5) independent standalone Redis masters, no replication between them; the same Options.MaxTTL on every client",
		Safe: Safety{
			Eviction:    "maxmemory-policy noeviction on every master; Locker.CheckServer reports others",
			Persistence: "each master keeps every write (appendfsync always) or comes back empty (appendonly no, save \"\"): an empty master is kept out of quorums for 1.1 x MaxTTL plus drift; one back with old data (an RDB snapshot, writes lost with everysec) is not detected and breaks exclusion and fences",
			Failover:    "none: independent standalone masters (a promoted replica is a master that forgot locks, undetected); at most N - quorum masters are lost at a time, a master counting as lost from its data loss until it has its fence era again (about 1.2 x MaxTTL later while a Locker that saw it empty stays open); more lost at once: TryLock refuses until an operator starts the deployment again (Options.FenceFloor)",
			Clocks:      "masters' and clients' clocks run at nearly the same rate: the drift allowance is ttl x DriftFactor (0.01) + DriftConst (2ms); no forward jumps",
			Timeouts:    "every Locker of the masters has the same Options.MaxTTL (the longest ttl; it sets the quarantine of a master that came back empty)",
		},
	},
	{
		Subject:     "zklock",
		Consistency: "ZooKeeper (ZAB consensus): linearizable writes; the lowest ephemeral-sequential node holds; Renew is a write through the leader, so a server cut off from the quorum extends nothing",
		Fence:       "the lock node's czxid (ensemble-wide transaction id)",
		AutoRelease: "when the holder's session expires: the session timeout after the leader last heard of it (a clean close frees at once)",
		Wakeup:      "watch on the predecessor; with Options.WaitContends (as measured here) the first 3 waiters queue lock nodes behind the holder, so a release hands over the key with no round trip after the watch event (Waiter)",
		Expiry:      "per session; a lease's Expires is capped at 2/3 S - TickTime/2 of the granted session timeout S (5/12 S with the default TickTime S/2)",
		Needs:       "ZooKeeper 3.5+ (an ensemble of 3 or 5 in production); a zklock.Connect Session, which reads the granted timeout",
		Safe: Safety{
			Persistence: "a majority keeps its data, with forceSync=yes (the default); a minority that loses its data rejoins and catches up",
			Failover:    "a majority up; leader changes keep locks (a new leader gives every session a full timeout)",
			Clocks:      "client and leader clocks run at the same rate, and follower-leader pings are not held back for much of the session timeout",
			Timeouts:    "the same minSessionTimeout and maxSessionTimeout on every server; Options.TickTime at least the servers' tickTime (default S/2, sound while minSessionTimeout is 2 ticks or more)",
			Other:       "nothing else creates or deletes nodes under Options.Prefix (Curator's and go-zookeeper's lock recipes take part; restrict with Options.ACL)",
		},
	},
	{
		Subject:     "etcdlock",
		Consistency: "etcd (Raft consensus): linearizable; a member cut off from the majority serves nothing stale",
		Fence:       "the key's create revision",
		AutoRelease: "when the lease expires: ttl rounded up to whole seconds (at least the server's minimum) plus up to 0.5s for the server's expiry check; a leader change extends it",
		Wakeup:      "watch on the key (Waiter)",
		Expiry:      "per lock (each held key on a lease of its own, whole seconds; the Locker reuses released leases as spares); Renew refreshes the lease for a ttl that is not longer than its TTL, and moves the key to a longer lease otherwise: it never shortens",
		Needs:       "etcd v3 (3 or 5 members in production)",
		Safe: Safety{
			Persistence: "members fsync before they acknowledge (never --unsafe-no-fsync); at most a minority loses its data at once; restore snapshots only with --bump-revision and --mark-compacted",
			Failover:    "a majority up and connected (otherwise calls fail and holders lose their leases at Expires: nothing unsafe); leader changes extend leases",
			Clocks:      "the leader's and the client's clocks run at the same rate: there is no drift allowance beyond rounding the ttl up to whole seconds",
			Timeouts:    "lease TTL in whole seconds, at least the members' minimum (3/2 of the election timeout): a shorter ttl holds the key longer; after a Renew with a shorter ttl the key may stay held up to the lease's longer TTL",
			Other:       "nothing else writes under Options.Prefix (restrict it with etcd's RBAC)",
		},
	},
	{
		Subject:     "sqllock/postgres",
		Consistency: "one PostgreSQL primary's transactions (as safe as its replication and failover)",
		Fence:       "a fence column that the acquiring statement increments; Prune keeps fences increasing through a high-water row",
		AutoRelease: "at ttl, by the database's clock (expires_at)",
		Wakeup:      "LISTEN/NOTIFY: Unlock notifies in its own statement; bounded by the remaining ttl (Waiter)",
		Expiry:      "per lock (ttl); Renew never shortens it (GREATEST of the old and the new expiry)",
		Needs:       "PostgreSQL 14+ (pgx v5 pool) and one table (created on first use, or DDL for migrations)",
		Safe: Safety{
			Persistence: "synchronous_commit and fsync on (otherwise a crash can lose acquisitions and renewals: two holders, a repeated fence)",
			Failover:    "statements reach the primary; synchronous replication (remote_apply), or treat a failover as losing every lease",
			Clocks:      "the database's clock runs at the clients' rate and does not jump (expiry uses now(); client clocks do not matter)",
			Timeouts:    "a reply after the ttl is an error, not an expired lease",
			Other:       "no transaction-pooling proxy (PgBouncer) between: it defeats ending abandoned sessions (a late statement can hold a key for its ttl) and LISTEN; Prune only when every process runs a version that has it",
		},
	},
	{
		Subject:     "sqllock/mysql",
		Consistency: "one MySQL/MariaDB primary's transactions (as safe as its replication and failover)",
		Fence:       "a fence column that the acquiring statement increments; Prune keeps fences increasing through a high-water row",
		AutoRelease: "at ttl, by the database's clock (UTC_TIMESTAMP(6))",
		Wakeup:      "Wait polls the row, one poller per Locker and key (1 ms after a change, backing off to 50 ms), and wakes one waiter at a time (Waiter)",
		Expiry:      "per lock (ttl); Renew never shortens it (GREATEST of the old and the new expiry)",
		Needs:       "MySQL 8.0 or MariaDB 10.5+ (go-sql-driver/mysql) and one table",
		Safe: Safety{
			Persistence: "innodb_flush_log_at_trx_commit=1 (otherwise a crash can lose acquisitions and renewals: two holders, a repeated fence)",
			Failover:    "statements reach the primary; semi-synchronous or group replication, or treat a failover as losing every lease",
			Clocks:      "the database's clock runs at the clients' rate and does not jump (client clocks and time zones do not matter)",
			Timeouts:    "a reply after the ttl is an error, not an expired lease",
			Other:       "no proxy that multiplexes connections (ProxySQL) for the Locker's user: it would KILL another client's connection; Prune only when every process runs a version that has it",
		},
	},
	{
		Subject:     "sqllock/sqlite",
		Consistency: "one database file on one host: excludes processes of that host only",
		Fence:       "a fence column that the acquiring statement increments; Prune keeps fences increasing through a high-water row",
		AutoRelease: "at ttl, by the host's clock",
		Wakeup:      "Wait polls the row, one poller per Locker and key (1 ms after a change, backing off to 50 ms), and wakes one waiter at a time (Waiter)",
		Expiry:      "per lock (ttl); Renew never shortens it",
		Needs:       "a local file (pure-Go driver modernc.org/sqlite, no server)",
		Safe: Safety{
			Persistence: "PRAGMA synchronous not OFF; the file is never replaced or restored from a copy while in use",
			Failover:    "none: one host, the file on a local disk (on NFS or SMB SQLite's locks may not exclude)",
			Clocks:      "the host's clock does not jump forward",
			Timeouts:    "a reply after the ttl is an error, not an expired lease",
			Other:       "Prune only when every process runs a version that has it",
		},
	},
	{
		Subject:     "redsync",
		Consistency: "one Redis master (same caveats as redislock), or RedLock over several masters",
		Fence:       "none",
		AutoRelease: "at the expiry (default 8s)",
		Wakeup:      "polling: retry after a random 50-250ms, 32 tries by default",
		Expiry:      "per lock: one expiry per Mutex, which Extend sets again",
		Needs:       "Redis (go-redis, redigo, rueidis or valkey clients)",
		Safe: Safety{
			Eviction:    oneRedis.Eviction,
			Persistence: oneRedis.Persistence + "; with several masters, a master that restarts empty is not detected (the RedLock paper's delayed restart is left to the operator)",
			Failover:    oneRedis.Failover,
			Clocks:      oneRedis.Clocks + "; with several masters, drift factor 0.01",
			Timeouts:    "the Mutex's Until is start + expiry - expiry x 0.01 (drift), with start taken before the requests",
		},
	},
	{
		Subject:     "bsm/redislock",
		Consistency: "one Redis master (same caveats as redislock)",
		Fence:       "none",
		AutoRelease: "at ttl",
		Wakeup:      "polling with the caller's RetryStrategy (no retry by default)",
		Expiry:      "per lock; Refresh sets the ttl it is given",
		Needs:       "Redis, go-redis v9",
		Safe: Safety{
			Eviction:    oneRedis.Eviction,
			Persistence: oneRedis.Persistence,
			Failover:    oneRedis.Failover,
			Clocks:      oneRedis.Clocks,
			Timeouts:    "no local deadline (Lock.TTL asks the server); Refresh sets the ttl it is given, so a shorter one whose reply is lost cuts the lock short behind the holder's back",
		},
	},
	{
		Subject:     "etcd concurrency.Mutex",
		Consistency: "etcd (Raft consensus): linearizable",
		Fence:       "none named; the create revision of the mutex's key is readable (Mutex.Header)",
		AutoRelease: "when the session's lease expires (session TTL, default 60s, kept alive in the background)",
		Wakeup:      "watch on the predecessor (a queue)",
		Expiry:      "per session",
		Needs:       "etcd v3",
		Safe: Safety{
			Persistence: "members fsync before they acknowledge; at most a minority loses its data",
			Failover:    "a majority up; leader changes extend leases",
			Clocks:      "the leader's and the client's clocks run at the same rate",
			Timeouts:    "session TTL in whole seconds (default 60s); no local deadline: Session.Done closes once keepalives fail, which can be after the server expired the lease",
		},
	},
	{
		Subject:     "go-zookeeper zk.Lock",
		Consistency: "ZooKeeper (ZAB consensus)",
		Fence:       "none exposed",
		AutoRelease: "when the session expires (session timeout)",
		Wakeup:      "watch on the predecessor (a queue); Lock takes no context and has no TryLock",
		Expiry:      "per session",
		Needs:       "ZooKeeper",
		Safe: Safety{
			Persistence: "a majority keeps its data (forceSync=yes)",
			Failover:    "a majority up; leader changes keep locks",
			Clocks:      "client and leader clocks run at the same rate",
			Timeouts:    "the holder gets no deadline: it must watch the session's events to learn that its lock is gone",
		},
	},
	{
		Subject:     "postgres advisory lock",
		Consistency: "one PostgreSQL server's lock table (not replicated: a failover forgets every lock)",
		Fence:       "none",
		AutoRelease: "when the holder's session ends: at once when its connection closes (a crashed process); a partitioned holder keeps it until TCP keepalive ends the session",
		Wakeup:      "server-side queue: pg_advisory_lock blocks until granted",
		Expiry:      "per session (connection); no ttl",
		Needs:       "PostgreSQL, and a connection held for as long as the lock",
		Safe: Safety{
			Persistence: "none needed: a restart ends every session and frees every lock",
			Failover:    "none: advisory locks are not replicated, so a promoted standby holds none (two holders)",
			Clocks:      "none: no expiry",
			Timeouts:    "the holder gets no deadline: a holder whose connection broke learns it only from its next statement",
			Other:       "no transaction-pooling proxy (PgBouncer): session locks need the server session",
		},
	},
}
