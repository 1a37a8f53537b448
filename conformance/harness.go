package conformance

import (
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// A Harness tells Run how to reach a backend, what it promises and how to break it.
type Harness struct {
	// NewClient returns a new client of the backend under test that behaves as if it
	// ran in another process: its own connections and session, sharing only the
	// server(s) with the other clients, and the faults that act on it alone. Run calls
	// it many times; release the client's resources with t.Cleanup. Required.
	//
	// For a cluster, spread clients over its servers (round-robin): IsolateServer
	// needs some clients on servers other than the isolated one.
	NewClient func(t testing.TB) Client

	// Caps states what the backend promises; Run checks it holds to it. What a
	// client implements (distlock.Waiter, distlock.Inspector, distlock.LossNotifier)
	// is found by type assertion on Client.Locker, and tested when present.
	Caps Capabilities

	// Faults are optional server-side fault injections. Run tests every one that is
	// set and skips, visibly (NOT RUN), the tests of those that are not.
	Faults Faults
}

// A Client is one client of the backend under test, with the faults that act on it.
// Each fault is optional: a test whose fault is nil is skipped with NOT RUN, never
// reported as passed. A Client is itself a distlock.Locker (through its Locker).
type Client struct {
	// Locker is the client. Required.
	distlock.Locker

	// Crash makes the client vanish without unlocking, as if its process were killed:
	// it closes the client's connections and ends its session. The client is not used
	// afterwards.
	Crash func()
	// Partition cuts the client off from the server(s) until heal is called: its
	// requests must fail or time out, not block forever.
	Partition func() (heal func())
	// Delay adds d of latency to every request and every reply of the client, in
	// order, until restore is called. Bytes already in flight when the client gives up
	// on a call are still delivered, as a real network would.
	Delay func(d time.Duration) (restore func())
	// IsolateServer cuts the server(s) that this client talks to off from their peers
	// (the rest of the cluster), while the client still reaches them, until heal is
	// called (Jepsen's "partition a member from the majority"). Only for backends
	// whose servers form a cluster.
	IsolateServer func() (heal func())
}

// Capabilities state what a backend promises. Zero values are the strictest promise
// except where noted.
type Capabilities struct {
	// SessionExpiry is true when a lease is freed by the end of the client's session
	// (ZooKeeper) rather than by its ttl. Such a backend's clients must set Crash,
	// which Run uses to end a holder's session.
	SessionExpiry bool
	// RestartLosesLocks is true when a restart of the server(s) frees every held key
	// and may reset fences (Redis without appendfsync always, an in-memory server).
	// RestartServer then checks only that the backend answers again; the backend's
	// documentation must say so. False means a lease taken before a restart stays
	// exclusive until its Expires, and fences keep increasing.
	RestartLosesLocks bool
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
	// WaitBound is how soon after Unlock a Waiter's Wait must return. Zero means
	// 250ms.
	WaitBound time.Duration
	// OpTimeout bounds how long any single call may take when the server is healthy
	// and when its context has a deadline; Run uses it to tell "prompt" from "hung".
	// Zero means 2s.
	OpTimeout time.Duration
	// CtxBound is how long after its context's deadline a call may return (the
	// backend's own work once it sees ctx done, and the scheduler on a loaded
	// machine), and how long after its lease's Expires a distlock.Held's Context
	// may end. Zero means 250ms.
	CtxBound time.Duration
	// FaultTimeout bounds how long the backend takes to serve again after a fault
	// that interrupts the cluster (a leader change, a minority losing its data, a
	// healed isolation). Zero means 10s.
	FaultTimeout time.Duration
}

// Faults inject server-side failures. Each is optional; a nil fault's tests are
// skipped with a NOT RUN message, never reported as passed. Each returns once the
// fault is in place (or, for the ones that end by themselves, once the backend
// serves again).
type Faults struct {
	// PauseServer stops the server(s) from answering (SIGSTOP) until the returned
	// resume is called (SIGCONT).
	PauseServer func(t *testing.T) (resume func())
	// RestartServer stops the server(s) and starts them again on the same address
	// with the same data, and returns once they answer.
	RestartServer func(t *testing.T)
	// ChangeLeader makes the cluster elect another leader (stop or step down the
	// current one), and returns once the cluster serves again.
	ChangeLeader func(t *testing.T)
	// LoseMinority makes a minority of the servers lose their data: each is stopped,
	// wiped and started again empty (or replaced by an empty member), and rejoins. It
	// returns once they serve again. RedLock: restart a minority of the masters empty.
	LoseMinority func(t *testing.T)
}

// faultNames lists the per-client and server-side faults for the Capabilities log.
var faultNames = []string{"Crash", "Partition", "Delay", "IsolateServer", "PauseServer", "RestartServer", "ChangeLeader", "LoseMinority"}

func (s *suite) faultSet(c Client, name string) bool {
	switch name {
	case "Crash":
		return c.Crash != nil
	case "Partition":
		return c.Partition != nil
	case "Delay":
		return c.Delay != nil
	case "IsolateServer":
		return c.IsolateServer != nil
	case "PauseServer":
		return s.h.Faults.PauseServer != nil
	case "RestartServer":
		return s.h.Faults.RestartServer != nil
	case "ChangeLeader":
		return s.h.Faults.ChangeLeader != nil
	case "LoseMinority":
		return s.h.Faults.LoseMinority != nil
	}
	return false
}
