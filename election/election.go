package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/keytext"
)

// Defaults of Options.
const (
	// DefaultTTL is the leader's lease ttl when Options.TTL is zero: a crashed
	// leader is replaced about this long after its last renewal.
	DefaultTTL = 15 * time.Second
	// DefaultPoll is how often Observe asks for the leader when nothing wakes it
	// sooner.
	DefaultPoll = 500 * time.Millisecond
)

// Options tune an Election. A nil *Options, and every zero field, means the default.
type Options struct {
	// TTL is the ttl of the leader's lease: how long the others wait for a leader
	// that crashed or was cut off. Default DefaultTTL. Every candidate of an
	// election should use the same TTL.
	TTL time.Duration
	// Every is the renewal period of the leader's lease; default TTL/3. It must be
	// below TTL.
	Every time.Duration
	// Lock tunes how Campaign waits for the key (see distlock.LockOptions). Its
	// Observer defaults to Observer.
	Lock distlock.LockOptions
	// Poll is how often Observe asks for the leader when nothing wakes it sooner
	// (a release that the Locker's distlock.Waiter reports): a change of leader
	// is reported within about Poll. Default DefaultPoll.
	Poll time.Duration
	// Observer sees the leader's acquisition, renewals, loss and release.
	Observer distlock.Observer
}

// Errors of this package. Test for them with errors.Is.
var (
	// ErrResigned is the cause of a Leadership's Context after Resign.
	ErrResigned = errors.New("election: resigned")
	// ErrNoLeader means that the election has no leader now (Leader). It wraps
	// distlock.ErrNotHeld.
	ErrNoLeader = fmt.Errorf("election: no leader: %w", distlock.ErrNotHeld)
)

// An Election is one key that candidates campaign for. It keeps no state between
// calls and is safe for concurrent use; each candidate (a process, or a goroutine
// with a Locker of its own) campaigns through its own Election or a shared one.
type Election struct {
	l   distlock.Locker
	key string
	o   Options
}

// New returns the election of key on l. It does no I/O. A nil l, an empty key or
// bad options give an error wrapping distlock.ErrInvalid.
func New(l distlock.Locker, key string, opts *Options) (*Election, error) {
	if l == nil {
		return nil, fmt.Errorf("election: New: %w: nil Locker", distlock.ErrInvalid)
	}
	if err := driver.ValidateKey(key, 0); err != nil {
		return nil, fmt.Errorf("election: New: %w", err)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	lo := o.Lock
	if o.TTL < 0 || o.Every < 0 || o.Poll < 0 || lo.MinBackoff < 0 || lo.MaxBackoff < 0 || lo.MaxWait < 0 {
		return nil, fmt.Errorf("election: New: %w: negative duration in Options (TTL %v, Every %v, Poll %v, Lock %+v)",
			distlock.ErrInvalid, o.TTL, o.Every, o.Poll, lo)
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.Every == 0 {
		o.Every = o.TTL / 3
	}
	if o.Every >= o.TTL {
		return nil, fmt.Errorf("election: New: %w: Options.Every %v is not below TTL %v", distlock.ErrInvalid, o.Every, o.TTL)
	}
	if o.Poll == 0 {
		o.Poll = DefaultPoll
	}
	if o.Lock.Observer.Logger == nil && o.Lock.Observer.OnEvent == nil {
		o.Lock.Observer = o.Observer
	}
	return &Election{l: l, key: key, o: o}, nil
}

// Key returns the election's key.
func (e *Election) Key() string { return e.key }

// Campaign blocks until the caller leads, and returns its Leadership; or until ctx
// ends, and returns an error that wraps ctx.Err() and, when another candidate led
// all along, distlock.ErrLocked (distlock.Lock's error). ctx bounds only the
// campaign: the Leadership lasts until Resign or its loss, so always Resign.
//
// Campaign waits with the Locker's distlock.Waiter when it has one (woken when the
// leader resigns or its lease expires), else with backoff; a backend error (a
// server that is down) is retried until ctx ends.
func (e *Election) Campaign(ctx context.Context) (*Leadership, error) {
	lease, err := distlock.Lock(ctx, e.l, e.key, e.o.TTL, &e.o.Lock)
	if err != nil {
		return nil, fmt.Errorf("election %s: campaign: %w", keytext.Quote(e.key), err)
	}
	return e.lead(ctx, lease), nil
}

// TryCampaign makes one attempt: it returns the Leadership when the election has
// no leader, and an error wrapping distlock.ErrLocked at once when it has one.
func (e *Election) TryCampaign(ctx context.Context) (*Leadership, error) {
	lease, err := e.l.TryLock(ctx, e.key, e.o.TTL)
	if err != nil {
		return nil, fmt.Errorf("election %s: campaign: %w", keytext.Quote(e.key), err)
	}
	return e.lead(ctx, lease), nil
}

// lead starts holding lease: the renewals keep ctx's values but not its end.
func (e *Election) lead(ctx context.Context, lease distlock.Lease) *Leadership {
	h := distlock.Hold(context.WithoutCancel(ctx), e.l, lease, &distlock.HoldOptions{TTL: e.o.TTL, Every: e.o.Every, Observer: e.o.Observer})
	lctx, cancel := context.WithCancelCause(h.Context())
	return &Leadership{key: e.key, term: lease.Fence, held: h, ctx: lctx, cancel: cancel}
}
