package redlock

import (
	"fmt"
	"math"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/redisx"
)

// Limits and defaults of Options.
const (
	// DefaultPrefix is the key namespace when Options.Prefix is empty. It differs
	// from package redislock's, so the two never share keys on one server.
	DefaultPrefix = "redlock"
	// MaxKeyLen is the longest key, in bytes, that a Locker accepts; a longer one
	// gives ErrInvalid. Each key is stored in full, on every node, in the names of
	// its lock key, its fence counter and its release channel, and the counter is
	// never deleted.
	MaxKeyLen = redisx.MaxKeyLen
	// MaxOwnerLen is the longest Options.Owner label, in bytes.
	MaxOwnerLen = redisx.MaxOwnerLen
	// DefaultCleanupTimeout is Options.CleanupTimeout when it is zero.
	DefaultCleanupTimeout = redisx.DefaultCleanupTimeout
	// DefaultNodeTimeout is Options.NodeTimeout when it is zero.
	DefaultNodeTimeout = 200 * time.Millisecond
	// MinNodeTimeout is the smallest per-node timeout a call uses, whatever its ttl.
	MinNodeTimeout = 5 * time.Millisecond
	// DefaultDriftFactor and DefaultDriftConst are Options.DriftFactor and
	// Options.DriftConst when they are zero: the clock-drift allowance of a lease of
	// ttl is ttl*DriftFactor + DriftConst.
	DefaultDriftFactor = 0.01
	DefaultDriftConst  = 2 * time.Millisecond
	// DefaultMaxTTL is Options.MaxTTL when it is zero.
	DefaultMaxTTL = time.Minute
	// MaxFenceFloor is the largest Options.FenceFloor: the fences of the last era
	// (eras stay below 2^13, see "Masters that lose their data" in the package
	// documentation) start above it.
	MaxFenceFloor = maxEra*eraUnit - 1
)

// Options configure a Locker. A nil *Options means the defaults; so does each zero
// field.
type Options struct {
	// Prefix is the namespace of every Redis key and channel the Locker uses on each
	// node (see "Keys on each master" in the package documentation). It must not
	// contain '{' or '}'. Default DefaultPrefix ("redlock").
	Prefix string
	// Owner is a label stored with every lock this Locker takes; Inspect reports it
	// and ErrLocked errors name it. It is for people, not for the owner check (that
	// uses the Lease's Token). At most MaxOwnerLen bytes. Default
	// driver.DefaultOwner() ("<hostname>:<pid>").
	Owner string
	// CleanupTimeout bounds the fresh context (never the caller's, which may be dead)
	// of the work a call leaves behind on the nodes: removing the locks of a failed
	// attempt (including those whose answer never came), settling nodes that
	// answered after the call stopped waiting for them, and raising lagging fence
	// counters. Locks left behind expire by their ttl. It must not be negative.
	// Default DefaultCleanupTimeout (5s).
	CleanupTimeout time.Duration
	// NodeTimeout caps how long a call waits for any one node. The timeout a call
	// actually uses depends on its ttl:
	//
	//	TryLock, Renew:        max(MinNodeTimeout, min(NodeTimeout, ttl/10))
	//	Unlock, Wait, Inspect: NodeTimeout
	//
	// so a slow or dead node costs an acquisition at most a tenth of its ttl per
	// round trip, and a node that answers later than that is treated as failed. Set
	// it above the round trip to your nodes under load, with a margin. It must not be
	// negative. Zero means DefaultNodeTimeout (200ms).
	NodeTimeout time.Duration
	// DriftFactor and DriftConst make the clock-drift allowance of a lease of ttl:
	// ttl*DriftFactor + DriftConst is subtracted from the lease's validity, for the
	// difference between the rates of the client's and the nodes' clocks.
	// DriftFactor must be in [0, 0.5) and DriftConst must not be negative; zero means
	// the defaults (0.01 and 2ms).
	DriftFactor float64
	DriftConst  time.Duration
	// MaxTTL is the longest ttl that TryLock and Renew accept (a longer one gives
	// ErrInvalid), and so the longest any lock on a node can have left. A node that
	// comes back empty (restarted without its data) is kept out of every quorum for
	// 1.1 * MaxTTL plus its drift allowance, measured on that node's clock, so that no
	// lock it forgot can still be in use when it counts again (see "Safety
	// assumptions" in the package documentation). Every Locker of a deployment must
	// use the same MaxTTL, or a larger one than any other's ttl. It must not be
	// negative. Zero means DefaultMaxTTL (1 minute).
	MaxTTL time.Duration
	// FenceFloor, when not zero, is a number that every fence issued so far is
	// known to be at most: a new deployment (every node without a marker, found
	// empty by one attempt) then starts its fences above it, in the era
	// FenceFloor/2^40 + 1, rather than at 1. Set it when starting a deployment again
	// after every node lost its data (see "Masters that lose their data" in the
	// package documentation), to the largest fence the protected resources have
	// seen or above. It has no effect on a running deployment. At most
	// MaxFenceFloor.
	FenceFloor uint64

	// hub shortens the pub/sub hubs' timings in tests (export_test.go).
	hub redisx.HubConfig
	// turnTimeout replaces defaultTurnTimeout in tests (export_test.go).
	turnTimeout time.Duration
	// off switches speedups off, in tests (speedups.go).
	off speedups
}

// withDefaults returns o with its zero fields filled in, or an error wrapping
// distlock.ErrInvalid that names the bad option.
func (o *Options) withDefaults() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	c := redisx.Common{Prefix: r.Prefix, Owner: r.Owner, CleanupTimeout: r.CleanupTimeout}
	if err := c.Fill(DefaultPrefix); err != nil {
		return r, err
	}
	r.Prefix, r.Owner, r.CleanupTimeout = c.Prefix, c.Owner, c.CleanupTimeout
	switch {
	case r.NodeTimeout < 0:
		return r, fmt.Errorf("%w: Options.NodeTimeout %v is negative", distlock.ErrInvalid, r.NodeTimeout)
	case math.IsNaN(r.DriftFactor) || r.DriftFactor < 0 || r.DriftFactor >= 0.5:
		return r, fmt.Errorf("%w: Options.DriftFactor %v is not in [0, 0.5)", distlock.ErrInvalid, r.DriftFactor)
	case r.DriftConst < 0:
		return r, fmt.Errorf("%w: Options.DriftConst %v is negative", distlock.ErrInvalid, r.DriftConst)
	case r.MaxTTL < 0:
		return r, fmt.Errorf("%w: Options.MaxTTL %v is negative", distlock.ErrInvalid, r.MaxTTL)
	case r.FenceFloor > MaxFenceFloor:
		return r, fmt.Errorf("%w: Options.FenceFloor %d is above MaxFenceFloor %d (eras stay below 2^13)", distlock.ErrInvalid, r.FenceFloor, uint64(MaxFenceFloor))
	}
	if r.NodeTimeout == 0 {
		r.NodeTimeout = DefaultNodeTimeout
	}
	if r.DriftFactor == 0 {
		r.DriftFactor = DefaultDriftFactor
	}
	if r.DriftConst == 0 {
		r.DriftConst = DefaultDriftConst
	}
	if r.MaxTTL == 0 {
		r.MaxTTL = DefaultMaxTTL
	}
	return r, nil
}
