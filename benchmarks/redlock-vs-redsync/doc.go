// Package redlockvsredsync compares package redlock with go-redsync/redsync v4 on the
// same five independent redis-servers (started by internal/testenv): an uncontended
// TryLock+Unlock, and a contended hand-off of one key among 16 waiters that each hold
// it for 2ms (gap-p50/gap-p99: from a holder's release to the next acquisition). It is a
// module of its own so that the root module does not depend on redsync.
//
// Run it with
//
//	cd benchmarks/redlock-vs-redsync && go test -run '^$' -bench . -benchtime 3s
//
// Both sides use one go-redis v9 client per server with default options, a ttl of
// 10s, and their own default per-node timeouts (redlock: a tenth of the ttl, at most
// 200ms; redsync: 5% of the ttl). Hand-off: redlock waits with distlock.Lock, which
// uses its pub/sub Wait; redsync with Mutex.LockContext, which polls with its default
// random 50-250ms delay between tries.
package redlockvsredsync
