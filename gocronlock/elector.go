package gocronlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/election"
)

// ErrNotLeader is the error of IsLeader when this scheduler does not lead.
var ErrNotLeader = errors.New("gocronlock: this scheduler is not the leader")

// resignTimeout bounds the Resign of a leadership that ended or that Close ends.
const resignTimeout = 5 * time.Second

// An Elector is gocron's Elector over a distlock.Locker: pass it to
// gocron.WithDistributedElector. It campaigns in the background from NewElector to
// Close, and campaigns again whenever its leadership is lost. Its methods are safe
// for concurrent use.
type Elector struct {
	e      *election.Election
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	lead *election.Leadership // nil while not leading
	err  error                // why campaigning stopped, once it has
}

var _ gocron.Elector = (*Elector)(nil)

// NewElector starts campaigning for key on l (see election.New for opts) and
// returns the Elector; call Close to stop. It returns an error wrapping
// distlock.ErrInvalid for a nil l, an empty key or bad options.
func NewElector(l distlock.Locker, key string, opts *election.Options) (*Elector, error) {
	e, err := election.New(l, key, opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	el := &Elector{e: e, cancel: cancel, done: make(chan struct{})}
	go el.run(ctx)
	return el, nil
}

func (el *Elector) run(ctx context.Context) {
	defer close(el.done)
	for {
		lead, err := el.e.Campaign(ctx)
		if err != nil { // Close, or an error that retrying cannot cure (ErrInvalid)
			el.mu.Lock()
			el.err = err
			el.mu.Unlock()
			return
		}
		el.set(lead)
		select {
		case <-lead.Context().Done():
		case <-ctx.Done():
		}
		el.set(nil)
		rctx, cancel := context.WithTimeout(context.Background(), resignTimeout)
		_ = lead.Resign(rctx)
		cancel()
	}
}

func (el *Elector) set(lead *election.Leadership) {
	el.mu.Lock()
	el.lead = lead
	el.mu.Unlock()
}

// Leadership returns the current leadership, or nil while this scheduler does not
// lead.
func (el *Elector) Leadership() *election.Leadership {
	el.mu.Lock()
	defer el.mu.Unlock()
	return el.lead
}

// IsLeader returns nil while this scheduler leads (election.Leadership.Err is nil),
// and otherwise an error wrapping ErrNotLeader. gocron calls it before each run
// and skips the run when it fails. It does no I/O.
func (el *Elector) IsLeader(context.Context) error {
	el.mu.Lock()
	lead, stopped := el.lead, el.err
	el.mu.Unlock()
	switch {
	case lead != nil:
		if err := lead.Err(); err != nil {
			return fmt.Errorf("%w: %w", ErrNotLeader, err)
		}
		return nil
	case stopped != nil:
		return fmt.Errorf("%w: campaign stopped: %w", ErrNotLeader, stopped)
	}
	return ErrNotLeader
}

// Context returns a context derived from ctx that is also cancelled when the
// current leadership ends (a cause wrapping distlock.ErrNotHeld when it is lost),
// or at once, with a cause wrapping ErrNotLeader, when this scheduler does not
// lead. Call it from a job, and do the job's work under it.
func (el *Elector) Context(ctx context.Context) context.Context {
	lead := el.Leadership()
	if lead == nil {
		c, cancel := context.WithCancelCause(ctx)
		cancel(ErrNotLeader)
		return c
	}
	// Derived from the leadership's context, so that its end reaches the job's
	// context synchronously (Close has returned: the cause is set), with ctx's
	// values and ctx's end (which reaches it from ctx's own goroutine).
	c, cancel := context.WithCancelCause(valuesFrom{lead.Context(), ctx})
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	context.AfterFunc(c, func() { stop() })
	return c
}

// valuesFrom is a context that ends with its Context and looks values up there
// first, then in vals.
type valuesFrom struct {
	context.Context
	vals context.Context
}

func (v valuesFrom) Value(key any) any {
	if x := v.Context.Value(key); x != nil {
		return x
	}
	return v.vals.Value(key)
}

// Close stops campaigning, resigns the leadership if it has one, and waits until
// that is done (the resignation is bounded by 5s: with a backend that cannot be
// reached, the key then lapses at its ttl). It never closes the distlock.Locker. It
// returns nil, also when called again.
func (el *Elector) Close() error {
	el.cancel()
	<-el.done
	return nil
}
