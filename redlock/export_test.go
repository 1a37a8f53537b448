package redlock

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/redisx"
)

// Names returns the Redis lock key, fence counter and release channel of key on every
// node, for a Locker with the given prefix.
func Names(prefix, key string) (lock, fence, channel string) {
	n := redisx.KeyNames(prefix, key)
	return n.Lock, n.Fence, n.Channel
}

// HoldAcquire makes l's phase-1 script to node i wait until release is called, and
// returns release.
func (l *Locker) HoldAcquire(i int) (release func()) {
	gate := make(chan struct{})
	hook := func(node int) {
		if node == i {
			<-gate
		}
	}
	l.hookAcquire.Store(&hook)
	var once sync.Once
	return func() {
		once.Do(func() {
			l.hookAcquire.Store(nil)
			close(gate)
		})
	}
}

// WithHub sets the timings of the pub/sub hubs in opts (nil: new Options) and
// returns it: ping is how long a connection may stay silent before it is pinged
// (and, silent as long again, replaced), idle how long it stays open after the last
// Wait, topicIdle how long a channel without waiters stays subscribed. Zero keeps a
// default.
func WithHub(opts *Options, ping, idle, topicIdle time.Duration) *Options {
	if opts == nil {
		opts = &Options{}
	}
	opts.hub = redisx.HubConfig{Ping: ping, Idle: idle, TopicIdle: topicIdle}
	return opts
}

// WithTurnTimeout sets how long a Locker in a key's turns waits after a release
// that named another Locker (turns.go) in opts (nil: new Options), and returns it.
func WithTurnTimeout(opts *Options, d time.Duration) *Options {
	if opts == nil {
		opts = &Options{}
	}
	opts.turnTimeout = d
	return opts
}

// Speedups that WithOff switches off (speedups.go).
const (
	UseFlights    = useFlights
	UseTurns      = useTurns
	UseSightings  = useSightings
	UseRetry      = useRetry
	UseRenewBatch = useRenewBatch
)

// WithOff switches the speedups off in opts (nil: new Options), and returns it.
func WithOff(opts *Options, off ...speedups) *Options {
	if opts == nil {
		opts = &Options{}
	}
	for _, s := range off {
		opts.off |= s
	}
	return opts
}

// CountAcquires counts l's phase-1 scripts sent to node 0 (one per attempt) from
// now on, and returns the count so far.
func (l *Locker) CountAcquires() (count func() int64) {
	var n atomic.Int64
	hook := func(node int) {
		if node == 0 {
			n.Add(1)
		}
	}
	l.hookAcquire.Store(&hook)
	return n.Load
}

// Quorum returns how many nodes must agree: N/2+1.
func (l *Locker) Quorum() int { return l.quorum }

// Nodes returns N, the number of Redis masters.
func (l *Locker) Nodes() int { return len(l.nodes) }

// Drift returns the clock-drift allowance of a lease of ttl.
func (l *Locker) Drift(ttl time.Duration) time.Duration { return l.drift(ttl) }

// Waiting returns how many Waits of l wait on key's line.
func (l *Locker) Waiting(key string) int { return l.queue.Len(key) }

// UnlockOn runs Unlock's release of lease (releaseTurnScript) on node i only, as
// an Unlock whose script reached the other nodes later would, and reports whether
// it released the lock there.
func (l *Locker) UnlockOn(ctx context.Context, lease distlock.Lease, i int) (bool, error) {
	return l.releaseOn(ctx, i, newUnlockCall(l.names(lease.Key), lease.Key, lease.Token, l.idArg))
}

// HoldRelease makes l's release scripts (Unlock's and the clean-ups') to the nodes
// idx wait until release is called, and returns release.
func (l *Locker) HoldRelease(idx ...int) (release func()) {
	gate := make(chan struct{})
	hook := func(node int) {
		if slices.Contains(idx, node) {
			<-gate
		}
	}
	l.hookRelease.Store(&hook)
	var once sync.Once
	return func() {
		once.Do(func() {
			l.hookRelease.Store(nil)
			close(gate)
		})
	}
}
