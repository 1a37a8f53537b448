package etcdlock

import (
	"fmt"
	"strings"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// Limits and defaults.
const (
	// MaxKeyLen is the longest key, in bytes, that a Locker accepts. Its encoding
	// may be up to three times longer; etcd's default request limit (1.5 MiB) leaves
	// room.
	MaxKeyLen = 1 << 16
	// MaxOwnerLen is the longest Options.Owner label, in bytes.
	MaxOwnerLen = 256
	// MaxTTL is the longest ttl a Locker accepts: etcd's largest lease TTL.
	MaxTTL = 9_000_000_000 * time.Second
	// DefaultPrefix is the key prefix of a Locker whose Options.Prefix is empty.
	DefaultPrefix = "distlock/"
	// DefaultCleanupTimeout bounds the revocation of a failed attempt's lease (see
	// Options.CleanupTimeout).
	DefaultCleanupTimeout = 5 * time.Second
	// DefaultRequestTimeout bounds each attempt of a request to etcd (see
	// Options.RequestTimeout).
	DefaultRequestTimeout = 2 * time.Second
)

// Options configure a Locker. A nil *Options, and every zero field, means the
// default.
type Options struct {
	// Prefix is prepended to every key; it must not be shared with other data.
	// Default DefaultPrefix. A '/' is appended when it does not end with one.
	Prefix string
	// Owner labels the holder for Inspect (Holder.Owner). It is for people, not for
	// the owner check (that uses the Lease's Token). At most MaxOwnerLen bytes.
	// Default driver.DefaultOwner() ("hostname:pid").
	Owner string
	// CleanupTimeout bounds the revocation of a failed attempt's lease, which runs
	// with a fresh context (never the caller's, which may be the reason for the
	// failure), and Close's revocation of the Locker's spare lease. Default
	// DefaultCleanupTimeout; it must not be negative.
	CleanupTimeout time.Duration
	// RequestTimeout bounds each attempt of a request to etcd. An attempt that
	// times out, or that a member cannot serve now (it has no leader, its
	// connection broke), is tried again, on the client's next endpoint, until the
	// call's context ends. Keep it well above the cluster's request latency under
	// load, and near its election time: a write that a member forwarded to a
	// leader that died is lost, and only another attempt completes it. Default
	// DefaultRequestTimeout; it must not be negative.
	RequestTimeout time.Duration
}

// withDefaults returns o with its zero fields filled in, or an error wrapping
// distlock.ErrInvalid that names the bad option.
func (o *Options) withDefaults() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Prefix == "" {
		r.Prefix = DefaultPrefix
	}
	if !strings.HasSuffix(r.Prefix, "/") {
		r.Prefix += "/"
	}
	if r.Owner == "" {
		r.Owner = driver.DefaultOwner()
	}
	switch {
	case len(r.Owner) > MaxOwnerLen:
		return r, fmt.Errorf("%w: Options.Owner of %d bytes is longer than %d bytes", distlock.ErrInvalid, len(r.Owner), MaxOwnerLen)
	case r.CleanupTimeout < 0:
		return r, fmt.Errorf("%w: Options.CleanupTimeout %v is negative", distlock.ErrInvalid, r.CleanupTimeout)
	case r.RequestTimeout < 0:
		return r, fmt.Errorf("%w: Options.RequestTimeout %v is negative", distlock.ErrInvalid, r.RequestTimeout)
	}
	if r.CleanupTimeout == 0 {
		r.CleanupTimeout = DefaultCleanupTimeout
	}
	if r.RequestTimeout == 0 {
		r.RequestTimeout = DefaultRequestTimeout
	}
	return r, nil
}
