package distlock

import (
	"context"
	"log/slog"
	"time"
)

// Op names what an Event reports.
type Op string

// The operations an Observer sees.
const (
	OpAcquire Op = "acquire" // Lock or Do acquired a lease; Took is the time spent waiting
	OpRenew   Op = "renew"   // Hold renewed a lease (Err set when an attempt failed)
	OpLost    Op = "lost"    // Hold gave a lease up as lost; Err says why
	OpRelease Op = "release" // Held.Release unlocked a lease
)

// An Event is one observed operation.
type Event struct {
	Op    Op
	Key   string
	Fence uint64
	Took  time.Duration // how long the operation took
	Err   error         // nil on success
}

// An Observer receives what Lock, Hold and Do do. The zero Observer observes nothing.
// There is no global default: pass one in the options of each call you want to see.
type Observer struct {
	// Logger, when set, receives one record per Event: Debug for successes, Warn for
	// failed renewals, Error for losses.
	Logger *slog.Logger
	// OnEvent, when set, is called synchronously for every Event (feed your metrics
	// from it). It must not block.
	OnEvent func(Event)
}

func (o Observer) emit(ev Event) {
	if o.OnEvent != nil {
		o.OnEvent(ev)
	}
	if o.Logger == nil {
		return
	}
	level := slog.LevelDebug
	switch {
	case ev.Op == OpLost:
		level = slog.LevelError
	case ev.Err != nil:
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{slog.String("key", ev.Key), slog.Uint64("fence", ev.Fence), slog.Duration("took", ev.Took)}
	if ev.Err != nil {
		attrs = append(attrs, slog.Any("err", ev.Err))
	}
	o.Logger.LogAttrs(context.Background(), level, "distlock "+string(ev.Op), attrs...)
}
