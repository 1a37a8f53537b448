package redislock

import (
	"time"

	"github.com/distlock/distlock/internal/redisx"
)

// Limits and defaults of Options.
const (
	// DefaultPrefix is the key namespace when Options.Prefix is empty.
	DefaultPrefix = "distlock"
	// MaxKeyLen is the longest key, in bytes, that a Locker accepts; a longer one
	// gives ErrInvalid. Each key is stored (in full) in the names of its lock key,
	// its fence key and its release channel, and the fence key is never deleted, so
	// the limit also bounds what a key costs in server memory.
	MaxKeyLen = redisx.MaxKeyLen
	// MaxOwnerLen is the longest Options.Owner label, in bytes.
	MaxOwnerLen = redisx.MaxOwnerLen
	// DefaultCleanupTimeout is Options.CleanupTimeout when it is zero.
	DefaultCleanupTimeout = redisx.DefaultCleanupTimeout
)

// Options configure a Locker. A nil *Options means the defaults; so does each zero
// field.
type Options struct {
	// Prefix is the namespace of every Redis key and channel the Locker uses (see
	// "Key layout" in the package documentation). Lockers with different prefixes
	// never see each other's locks. It must not contain '{' or '}', which would
	// change the keys' Cluster hash tag. Default DefaultPrefix ("distlock").
	Prefix string
	// Owner is a label stored with every lock this Locker takes; Inspect reports it,
	// and ErrLocked errors name it. It is for people, not for the owner check (that
	// uses the Lease's Token). At most MaxOwnerLen bytes. Default
	// driver.DefaultOwner() ("<hostname>:<pid>").
	Owner string
	// CleanupTimeout bounds the fresh context (never the caller's, which may be
	// dead) that removes the lock a TryLock may have made when its outcome is
	// unknown or its reply came too late. The lock expires by itself after its ttl
	// if the removal fails. It must not be negative. Default DefaultCleanupTimeout
	// (5s).
	CleanupTimeout time.Duration

	// hub shortens the pub/sub hub's timings in tests (export_test.go).
	hub redisx.HubConfig
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
	return r, nil
}
