package benchmarks

import (
	"context"

	"github.com/distlock/distlock/memlock"
)

// MemlockSubjects returns the in-process backend: every Client shares one
// memlock.Locker, as the clients of one server share its state. It has no
// connection, so W3's kill abandons the lease, which frees the key at its ttl.
func MemlockSubjects(cfg Config) []Subject {
	l := memlock.New()
	return []Subject{{
		Name:      "memlock",
		Protocol:  "memory",
		Role:      Ours,
		Wakeup:    "channel (Waiter)",
		Waiter:    true,
		Workloads: ours,
		Bound:     cfg.TTL,
		BoundKind: "ttl",
		New: func(context.Context, Route) (Client, error) {
			return &lockerClient{l: l, ttl: cfg.TTL}, nil
		},
		Note: "in-process: excludes goroutines of one process only",
	}}
}
