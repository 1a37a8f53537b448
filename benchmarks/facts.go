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
	// Expiry says whether the expiry is per lock (a ttl) or per session.
	Expiry string
	// Needs is what it takes to run.
	Needs string
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
	},
	{
		Subject:     "redislock",
		Consistency: "one Redis master (single, Sentinel or Cluster); replication is asynchronous, so a failover can lose a lock just taken (two holders) and step a fence back",
		Fence:       "INCR of a per-key counter in the acquire script (survives restarts with appendfsync always)",
		AutoRelease: "at ttl (SET PX, by the server's clock)",
		Wakeup:      "pub/sub on the key's release channel, bounded by the holder's remaining PTTL (Waiter)",
		Expiry:      "per lock (ttl, ms)",
		Needs:       "Redis >= 2.6 (scripts), go-redis v9",
	},
	{
		Subject:     "redlock",
		Consistency: "a quorum (N/2+1) of N independent Redis masters; safe under bounded clock drift and the restart rule (a crashed master rejoins after the longest ttl, or persists every write)",
		Fence:       "per-master counters that an acquisition makes a quorum agree on (quorum read, quorum write)",
		AutoRelease: "at ttl on each master; the lease's validity is ttl - elapsed - drift",
		Wakeup:      "pub/sub on every master (Waiter)",
		Expiry:      "per lock (ttl)",
		Needs:       "N (3 or 5) independent Redis masters, no replication between them",
	},
	{
		Subject:     "zklock",
		Consistency: "ZooKeeper (ZAB consensus): linearizable writes; the lowest ephemeral-sequential node holds",
		Fence:       "the lock node's czxid (ensemble-wide transaction id)",
		AutoRelease: "when the holder's session expires: the session timeout after the server last heard from it (a clean close frees at once)",
		Wakeup:      "watch on the predecessor in a queue of waiter nodes: one waiter woken per release (Waiter)",
		Expiry:      "per session (the ttl only caps the lease's local Expires)",
		Needs:       "ZooKeeper 3.5+ (an ensemble of 3 or 5 in production)",
	},
	{
		Subject:     "etcdlock",
		Consistency: "etcd (Raft consensus): linearizable",
		Fence:       "the key's create revision",
		AutoRelease: "when the lease expires: ttl rounded up to whole seconds (at least the server's minimum) plus up to 0.5s for the server's expiry check; a leader change extends it",
		Wakeup:      "watch on the key (Waiter)",
		Expiry:      "per lock (a lease per acquisition, whole seconds)",
		Needs:       "etcd v3 (3 or 5 members in production)",
	},
	{
		Subject:     "sqllock (postgres)",
		Consistency: "one PostgreSQL primary's transactions (as safe as its replication and failover)",
		Fence:       "a fence column that the acquiring statement increments; rows are never deleted",
		AutoRelease: "at ttl, by the database's clock (expires_at)",
		Wakeup:      "LISTEN/NOTIFY: Unlock notifies in its own statement; bounded by the remaining ttl (Waiter)",
		Expiry:      "per lock (ttl)",
		Needs:       "PostgreSQL (pgx v5) and one table, created on first use",
	},
	{
		Subject:     "sqllock (mariadb)",
		Consistency: "one MySQL/MariaDB primary's transactions (as safe as its replication and failover)",
		Fence:       "a fence column that the acquiring statement increments; rows are never deleted",
		AutoRelease: "at ttl, by the database's clock",
		Wakeup:      "none: distlock.Lock polls with jittered exponential backoff (10ms to 1s)",
		Expiry:      "per lock (ttl)",
		Needs:       "MySQL 8 or MariaDB (go-sql-driver/mysql) and one table",
	},
	{
		Subject:     "sqllock (sqlite)",
		Consistency: "one database file on one host: excludes processes of that host only",
		Fence:       "a fence column that the acquiring statement increments",
		AutoRelease: "at ttl, by the host's clock",
		Wakeup:      "none: distlock.Lock polls with jittered exponential backoff (10ms to 1s)",
		Expiry:      "per lock (ttl)",
		Needs:       "a local file (pure-Go driver modernc.org/sqlite, no server)",
	},
	{
		Subject:     "redsync",
		Consistency: "one Redis master (same caveats as redislock), or RedLock over several masters",
		Fence:       "none",
		AutoRelease: "at the expiry (default 8s)",
		Wakeup:      "polling: retry after a random 50-250ms, 32 tries by default",
		Expiry:      "per lock",
		Needs:       "Redis (go-redis, redigo, rueidis or valkey clients)",
	},
	{
		Subject:     "bsm/redislock",
		Consistency: "one Redis master (same caveats as redislock)",
		Fence:       "none",
		AutoRelease: "at ttl",
		Wakeup:      "polling with the caller's RetryStrategy (no retry by default)",
		Expiry:      "per lock",
		Needs:       "Redis, go-redis v9",
	},
	{
		Subject:     "etcd concurrency.Mutex",
		Consistency: "etcd (Raft consensus): linearizable",
		Fence:       "none named; the create revision of the mutex's key is readable (Mutex.Header)",
		AutoRelease: "when the session's lease expires (session TTL, default 60s, kept alive in the background)",
		Wakeup:      "watch on the predecessor (a queue)",
		Expiry:      "per session",
		Needs:       "etcd v3",
	},
	{
		Subject:     "go-zookeeper zk.Lock",
		Consistency: "ZooKeeper (ZAB consensus)",
		Fence:       "none exposed",
		AutoRelease: "when the session expires (session timeout)",
		Wakeup:      "watch on the predecessor (a queue); Lock takes no context and has no TryLock",
		Expiry:      "per session",
		Needs:       "ZooKeeper",
	},
	{
		Subject:     "postgres advisory lock",
		Consistency: "one PostgreSQL server's lock table (not replicated: a failover forgets every lock)",
		Fence:       "none",
		AutoRelease: "when the holder's session ends: at once when its connection closes (a crashed process); a partitioned holder keeps it until TCP keepalive ends the session",
		Wakeup:      "server-side queue: pg_advisory_lock blocks until granted",
		Expiry:      "per session (connection); no ttl",
		Needs:       "PostgreSQL, and a connection held for as long as the lock",
	},
}
