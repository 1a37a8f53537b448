package redlock

// speedups are the mechanisms that make a Locker faster (fewer rounds, messages or
// goroutines) without being part of its contract: without one, a Locker keeps
// every property of its contract. Each can be switched off (Options.off, set by
// tests through export_test.go) to measure what it gains.
type speedups uint8

const (
	// useFlights: one attempt per key of a Locker at a time (flight.go).
	useFlights speedups = 1 << iota
	// useTurns: the keys' turns (turns.go). Off, TryLocks and Waits do not join
	// them, and Unlock's release goes to the key's channel.
	useTurns
	// useSightings: a Wait after a TryLock that saw the key held skips the read
	// (sighting.go). Off, a Wait always reads the locks.
	useSightings
	// useRetry: one more attempt after a release that came too early (retry.go).
	useRetry
	// useRenewBatch: concurrent Renews share fan-outs (renewbatch.go). Off, each
	// Renew is a fan-out of its own.
	useRenewBatch
)

// uses reports whether l uses s (it is not switched off).
func (l *Locker) uses(s speedups) bool { return l.opts.off&s == 0 }
