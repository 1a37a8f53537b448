package distlock

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/distlock/distlock/internal/keytext"
)

// Op names what an Event reports.
type Op string

// The operations an Observer sees.
const (
	// OpAttempt is one TryLock made by Lock or Do. Err is nil when it acquired, wraps
	// ErrLocked on contention, and is something else when it failed. Attempt counts
	// from 1.
	OpAttempt Op = "attempt"
	// OpWait is one pause of Lock between attempts: a Waiter's Wait (Err is its
	// error, if any) or a backoff sleep. Took is how long it lasted.
	OpWait Op = "wait"
	// OpAcquire ends a Lock or Do acquisition: Err is nil and Fence set when it
	// acquired, else the error it returned. Took is the time since it started and
	// Attempt the number of attempts it made.
	OpAcquire Op = "acquire"
	// OpHold is Hold starting to keep a lease alive; OpLost or OpRelease ends it.
	OpHold Op = "hold"
	// OpRenew is one renewal by Hold; Err is set when it failed.
	OpRenew Op = "renew"
	// OpLost is Hold giving a lease up as lost; Err says why (it wraps ErrNotHeld).
	OpLost Op = "lost"
	// OpRelease is Held.Release unlocking a lease; Err is set when the Unlock failed.
	OpRelease Op = "release"
)

// An Event is one observed operation.
type Event struct {
	Op      Op
	Key     string
	Fence   uint64        // the lease's fence, when there is a lease
	Took    time.Duration // how long the operation took
	Attempt int           // OpAttempt: which attempt; OpAcquire: how many attempts
	Err     error         // nil on success
}

// An Observer receives what Lock, Hold and Do do. The zero Observer observes nothing.
// There is no global default: pass one in the options of each call you want to see.
// The package distlock/otelobserve turns an Observer into OpenTelemetry metrics and
// spans.
type Observer struct {
	// Logger, when set, receives one record per Event, logged with the caller's
	// context: Debug for successes, contention and waits, Warn for failures, Error for
	// a loss.
	Logger *slog.Logger
	// OnEvent, when set, is called synchronously for every Event, with the context of
	// the call that caused it (Lock's, Do's, Hold's, Release's): feed your metrics and
	// traces from it. It must not block.
	OnEvent func(ctx context.Context, ev Event)
}

func (o Observer) emit(ctx context.Context, ev Event) {
	if o.OnEvent != nil {
		o.OnEvent(ctx, ev)
	}
	if o.Logger == nil {
		return
	}
	level := slog.LevelDebug
	switch {
	case ev.Op == OpLost:
		level = slog.LevelError
	case ev.Err != nil && !errors.Is(ev.Err, ErrLocked):
		level = slog.LevelWarn
	}
	if !o.Logger.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{slog.String("key", keytext.Log(ev.Key)), slog.Duration("took", ev.Took)}
	if ev.Fence != 0 {
		attrs = append(attrs, slog.Uint64("fence", ev.Fence))
	}
	if ev.Attempt != 0 {
		attrs = append(attrs, slog.Int("attempt", ev.Attempt))
	}
	if ev.Err != nil {
		attrs = append(attrs, slog.Any("err", ev.Err))
	}
	o.Logger.LogAttrs(ctx, level, "distlock "+string(ev.Op), attrs...)
}
