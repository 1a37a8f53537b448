package zklock

import (
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// Limits and defaults.
const (
	// DefaultPrefix is the parent of every key's node when Options.Prefix is empty.
	DefaultPrefix = "/distlock"
	// MaxKeyLen is the longest key, in bytes. A key's node is named by the base64url
	// encoding of its bytes (4/3 as long), and every request about a lock carries
	// that name, far below ZooKeeper's 1 MiB packet limit (jute.maxbuffer).
	MaxKeyLen = 4096
	// MaxOwnerLen is the longest Options.Owner label, in bytes.
	MaxOwnerLen = 256
)

// Options configure a Locker. Every zero field means its default; a nil *Options
// means all defaults.
//
// There is no session timeout to set: the Locker takes the one that the servers
// granted from its Session (see Connect).
type Options struct {
	// Prefix is the persistent node under which every key gets its node: an
	// absolute path of components of A-Z a-z 0-9 and -_.:@+=, outside /zookeeper.
	// Lockers with different prefixes never see each other's locks. Default
	// DefaultPrefix.
	Prefix string
	// Owner is a label stored as the data of every lock node this Locker creates;
	// Inspect reports it. It is for people, not for the owner check (that uses the
	// Lease's Token). At most MaxOwnerLen bytes. Default driver.DefaultOwner().
	Owner string
	// ACL is the ACL of every node the Locker creates (Prefix's components, the key
	// nodes, the lock nodes). Default zk.WorldACL(zk.PermAll).
	ACL []zk.ACL
	// TickTime is the servers' tickTime, or an upper bound of it. The leader learns
	// that a session on a follower is alive only from the follower's answers to its
	// pings, which it sends every TickTime/2, so a lease's validity is reduced by
	// that much (see the package doc). Zero means half the granted session timeout:
	// a server grants no session timeout below its minSessionTimeout, which is 2
	// ticks unless configured. Set it when the servers' minSessionTimeout is below 2
	// ticks (then the default is too small, and Expires unsound), or to the actual
	// tickTime to get longer leases. It must be positive and below 4/3 of the
	// granted session timeout.
	TickTime time.Duration
	// DisconnectGrace is how long the connection to ZooKeeper may be down before
	// the Lost channels of this Locker's leases close ("suspended" means "maybe
	// lost"). Zero means at once, as Curator's default error policy treats
	// SUSPENDED like LOST. A larger grace keeps leases (and the work under Hold)
	// across short disconnections; the lease's Expires bounds it in any case. It must
	// not be negative.
	DisconnectGrace time.Duration
	// WaitContends makes the first 3 Waits of a key queue a lock node behind the
	// holder while they wait, so that a release hands the key to the next waiter
	// with no round trip after the watch event (the TryLock that follows takes the
	// lease over). Set it only when every Wait is followed by a TryLock at once
	// (distlock.Lock and Do do so): a Wait that returns nil without a TryLock keeps
	// the key from everyone for up to 1 s, and Inspect reports its node as the
	// holder. election's Observe calls Wait without a TryLock. Default false.
	WaitContends bool
}

// withDefaults returns o with its zero fields filled in for a session whose smallest
// granted timeout is granted, or an error wrapping distlock.ErrInvalid that names the
// bad option.
func (o *Options) withDefaults(granted time.Duration) (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Prefix == "" {
		r.Prefix = DefaultPrefix
	}
	if err := validatePrefix(r.Prefix); err != nil {
		return r, err
	}
	if r.Owner == "" {
		r.Owner = driver.DefaultOwner()
	}
	if len(r.Owner) > MaxOwnerLen {
		return r, fmt.Errorf("%w: Options.Owner of %d bytes is longer than MaxOwnerLen (%d bytes)", distlock.ErrInvalid, len(r.Owner), MaxOwnerLen)
	}
	if len(r.ACL) == 0 {
		r.ACL = zk.WorldACL(zk.PermAll)
	}
	if r.TickTime == 0 {
		r.TickTime = granted / 2
	}
	if r.TickTime < 0 || leaseBound(granted, granted, r.TickTime) <= 0 {
		return r, fmt.Errorf("%w: Options.TickTime %v: it must be positive and below 4/3 of the granted session timeout %v (a lease's validity is 2/3 of the session timeout minus half a tick)", distlock.ErrInvalid, r.TickTime, granted)
	}
	if r.DisconnectGrace < 0 {
		return r, fmt.Errorf("%w: Options.DisconnectGrace %v is negative", distlock.ErrInvalid, r.DisconnectGrace)
	}
	return r, nil
}
