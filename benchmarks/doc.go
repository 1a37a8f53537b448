// Package benchmarks measures every distlock backend, and the peer libraries a user
// would pick instead, under the same workloads in one run, and writes the
// backend matrix (results/matrix.md, results/matrix.csv and the README section
// between the matrix markers).
//
// It is its own module (a replace points at the library), so that the peers
// (go-redsync/redsync, bsm/redislock, ...) never enter the library's go.mod.
//
// # Workloads
//
//   - W1, uncontended: TryLock followed by Unlock, each goroutine on its own key, with
//     1 and with 16 goroutines sharing one client: operations per second and the
//     latency of one TryLock+Unlock pair (p50, p99). With 1 goroutine the
//     subjects of a protocol take turns pair by pair (RunW1Interleaved): one
//     goroutine runs a pair on each subject's client in turn, so that a change in
//     the machine's load hits them alike; a cell's operations per second is the
//     median of the rates of Config.W1Rounds (6) blocks of its pairs, with their
//     lowest and highest as the spread. A subject's pair thus never follows its
//     own last pair at once, as a caller that locks now and then does not: a
//     subject that gains much from a hot loop gains less here (PostgreSQL's
//     advisory lock made 9509 pairs a second in rounds, 5672 pair by pair, where
//     sqllock/postgres made 3685 and 3653). With 16 goroutines, each subject's own
//     load, W1 runs in rounds (Config.W1Rounds), the subjects taking turns; a
//     cell's operations per second is the median of its rounds' rates, with
//     their lowest and highest as the spread, so that a burst of other work on
//     the machine during one round (a fast subject's round lasts a fraction of a
//     second) moves the ratios no more than any other round does.
//   - W2, contended handoff: 16 waiters, each with its own client (its own
//     connections), take turns on one key with a blocking acquire and hold it 1ms:
//     acquisitions per second, and the gap from one holder's Unlock (the moment it
//     calls Unlock) to the next holder's acquisition (the moment its acquire
//     returns), both read from one monotonic clock in this process. Like W1, W2
//     runs in rounds (Config.W2Rounds, 3), the subjects of a protocol taking
//     turns, so that a change in the machine's load hits them alike; the report
//     gives the median of the rounds' gap p50 and their spread (lowest to
//     highest).
//   - W3, failover: a holder, connected through a faultproxy, acquires the key and is
//     then "killed": its connections are reset and new ones refused, as when its
//     process dies (clients without a network connection close their client
//     instead). A waiter on its own client is already blocked on the key; W3
//     measures the time from the kill until the waiter holds the key, and compares
//     it with the lease's ttl or the session timeout.
//   - W4, herd: 1,000 goroutines over 4 clients block on one key with a blocking
//     acquire (distlock.Lock, so the Locker's Waiter) while a first holder has
//     it; then holders take turns, each holding it 1ms, for up to 100 handoffs or
//     10s: the gap from a holder's call of Unlock to the next holder's
//     acquisition (p50, p99), as in W2, and the server requests per handoff, read from the
//     server's own counter (counters.go: Redis INFO total_commands_processed,
//     etcd grpc_server_msg_received_total, ZooKeeper mntr zk_packets_received,
//     MariaDB Questions; for PostgreSQL the statements its clients sent, by a pgx
//     tracer, as pg_stat_database's counts come up to 10 s late; "-" where there
//     is none). Goal: p50 <= 2ms and at most 25 requests per handoff.
//   - W5, many leases: one client holds 10,000 keys at once under
//     distlock.Hold (ttl 3s, a renewal every 1s) for 6s: renewals per second,
//     server requests and this process's CPU time per renewal, and the live
//     heap and goroutines each held lease adds; leases lost in the window are
//     counted. Goal: less than 2 KiB of heap per held lease.
//
// W4 and W5 run on our backends only: they need a distlock.Locker (Hold). A
// cell that fails to set up records its error and the matrix goes on. The test
// flags -matrix.only (a regexp of subject names) and -matrix.workloads (a comma
// list: w1,w2,...) select a part of the matrix; the README is then left alone.
//
// Each subject is a Subject: a name, its role (one of ours, a peer library, or a
// protocol's raw floor: the fewest round trips issued by hand), and a constructor of
// Clients. Each backend's adapters are one small file (redis.go, etcd.go, ...).
//
// # Output
//
// `make matrix` (go test -tags matrix -run TestMatrix) starts the servers with
// internal/testenv, runs the whole matrix and writes:
//
//   - results/matrix.csv: every cell, with all its digits, after comment lines
//     that describe the run (date, the commit measured and whether its tree had
//     uncommitted changes, machine, load, versions, settings) and a line that
//     holds the same as JSON, from which ReadCSV rebuilds the Report.
//   - results/matrix.md: everything: the header in full, the goals, the compact
//     tables, a table per workload with every row, the facts and the notes.
//   - the README's section between the markers: the compact report (the run's
//     facts in a few lines, the goals, one short table per workload with each
//     of our backends next to the best peer of its protocol and the floor or
//     the bound, with the ratios) and the facts (AllFacts): what else users
//     compare and what each lock is safe under.
//
// `make render` (go run ./cmd/render) rebuilds matrix.md and the README section
// from results/matrix.csv without measuring. The package's plain tests (go test
// ./...) run every workload tiny against memlock only, as a smoke test, and
// check the report's files.
package benchmarks
