package conformance

import (
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// A Harness tells Run how to reach a backend and what it promises.
type Harness struct {
	// NewClient returns a new client of the backend under test that behaves as if it
	// ran in another process: its own connections and session, sharing only the
	// server(s) with the other clients. Run calls it many times; release the client's
	// resources with t.Cleanup. Required.
	NewClient func(t *testing.T) distlock.Locker

	// Caps states what the backend promises; Run checks it holds to it.
	Caps Capabilities

	// Faults are optional fault injections. Run tests every one that is set and
	// skips, visibly (NOT RUN), the tests of those that are not.
	Faults Faults
}

// Capabilities state what a backend promises. Zero values are the strictest promise
// except where noted.
type Capabilities struct {
	// SessionExpiry is true when a lease is freed by the end of the client's session
	// (ZooKeeper) rather than by its ttl. Such a backend must set Faults.Crash, which
	// Run uses to end a holder's session.
	SessionExpiry bool
	// MinTTL is the smallest ttl the backend honours exactly; Run uses no smaller ttl.
	// Zero means 100ms.
	MinTTL time.Duration
	// Grace is how long after ttl (or after Crash, for session backends: the session
	// timeout plus detection) the key may still be held. Zero means 250ms.
	Grace time.Duration
	// MaxKeyLen is the longest key in bytes that the backend accepts; a longer key
	// must give ErrInvalid. Zero means the backend accepts keys of any length, and Run
	// tries one of 64 KiB.
	MaxKeyLen int
	// Waiter and Inspector state that clients implement distlock.Waiter and
	// distlock.Inspector. Run fails when the statement and the client disagree.
	Waiter    bool
	Inspector bool
	// WaitBound is how soon after Unlock a Waiter's Wait must return. Zero means
	// 250ms.
	WaitBound time.Duration
	// OpTimeout bounds how long any single call may take when the server is healthy
	// and when its context has a deadline; Run uses it to tell "prompt" from "hung".
	// Zero means 2s.
	OpTimeout time.Duration
}

// Faults inject failures. Each is optional; a nil fault's tests are skipped with a
// NOT RUN message, never reported as passed.
type Faults struct {
	// Crash makes client l vanish without unlocking, as if its process were killed:
	// it closes l's connections and ends its session. l is not used afterwards.
	Crash func(t *testing.T, l distlock.Locker)
	// Partition cuts client l off from the server(s) until the returned heal is
	// called: its requests must fail or time out, not block forever.
	Partition func(t *testing.T, l distlock.Locker) (heal func())
	// Delay adds d of latency to every request and reply of client l until the
	// returned restore is called.
	Delay func(t *testing.T, l distlock.Locker, d time.Duration) (restore func())
	// PauseServer stops the server(s) from answering (SIGSTOP) until the returned
	// resume is called (SIGCONT).
	PauseServer func(t *testing.T) (resume func())
	// RestartServer stops the server(s) and starts them again on the same address
	// with the same data, and returns once they answer.
	RestartServer func(t *testing.T)
}
