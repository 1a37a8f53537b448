package gocronlock

import (
	"fmt"
	"time"

	"github.com/distlock/distlock"
)

// Defaults of Options.
const (
	// DefaultMinHold is the MinHold of a zero Options.MinHold: above the clock
	// differences of NTP-synchronised machines, below a period of a second.
	DefaultMinHold = 500 * time.Millisecond
	// DefaultReleaseTimeout bounds the final Unlock of a lease.
	DefaultReleaseTimeout = 5 * time.Second
)

// Options tune a Locker. A nil *Options, and every zero field, means the default.
type Options struct {
	// TTL is the ttl of each run's lease; Hold renews it every Every while the job
	// runs. A scheduler that crashes during a run keeps the job locked for up to
	// TTL. Default distlock.DefaultTTL.
	TTL time.Duration
	// Every is the renewal period; default TTL/3. It must be below TTL.
	Every time.Duration
	// MinHold keeps a job's key held until at least MinHold after it was
	// acquired, even when the job returns sooner (the release then happens in the
	// background), so that a scheduler whose clock is a little late finds the tick
	// taken. See the package doc for how to choose it. Default DefaultMinHold; to
	// release as soon as the job returns, set it to time.Nanosecond.
	MinHold time.Duration
	// KeyPrefix is put before gocron's key (the job's name) to make the lock's
	// key. Default "".
	KeyPrefix string
	// ReleaseTimeout bounds each Unlock of a lease (it runs even when gocron's
	// context has ended). Default DefaultReleaseTimeout.
	ReleaseTimeout time.Duration
	// OnLost, when set, is called once for each run whose lease is lost before the
	// job returns, with gocron's key and the reason (wrapping distlock.ErrNotHeld).
	// It runs on a goroutine of its own and must return promptly: Unlock waits
	// for it.
	OnLost func(key string, err error)
	// Observer sees the renewals, a loss and the release of every run's lease.
	Observer distlock.Observer
}

func (o *Options) withDefaults() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	if r.TTL < 0 || r.Every < 0 || r.MinHold < 0 || r.ReleaseTimeout < 0 {
		return r, fmt.Errorf("gocronlock: %w: negative duration in Options (TTL %v, Every %v, MinHold %v, ReleaseTimeout %v)",
			distlock.ErrInvalid, r.TTL, r.Every, r.MinHold, r.ReleaseTimeout)
	}
	if r.TTL == 0 {
		r.TTL = distlock.DefaultTTL
	}
	if r.Every == 0 {
		r.Every = r.TTL / 3
	}
	if r.Every >= r.TTL {
		return r, fmt.Errorf("gocronlock: %w: Options.Every %v is not below TTL %v", distlock.ErrInvalid, r.Every, r.TTL)
	}
	if r.MinHold == 0 {
		r.MinHold = DefaultMinHold
	}
	if r.ReleaseTimeout == 0 {
		r.ReleaseTimeout = DefaultReleaseTimeout
	}
	return r, nil
}
