package benchmarks

import (
	"context"
	"database/sql"

	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/sqlite" // registers modernc's driver "sqlite"
)

// SQLiteSubjects returns sqllock's SQLite Locker on the database file path: every
// Client opens the file on its own, as processes of one host would. It has no
// network connection: W3 kills the holder by closing its database without
// unlocking.
func SQLiteSubjects(path string, cfg Config) []Subject {
	return []Subject{{
		Name: "sqllock/sqlite", Protocol: "sqlite", Role: Ours,
		Wakeup: "Wait: one poller per Locker and key (1 ms after a change, up to 50 ms), one waiter woken at a time", Workloads: ours,
		Bound: cfg.TTL, BoundKind: "ttl",
		New: func(ctx context.Context, _ Route) (Client, error) {
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
			if err != nil {
				return nil, err
			}
			l, err := sqlite.New(ctx, db, &sqllock.Options{Table: "bench_locks"})
			if err != nil {
				_ = db.Close()
				return nil, err
			}
			return &lockerClient{l: l, ttl: cfg.TTL, close: closeBoth(l.Close, db.Close)}, nil
		},
		Note: "one database file on local disk, opened by every client",
	}}
}
