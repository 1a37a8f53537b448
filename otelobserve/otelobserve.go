// Package otelobserve turns what distlock's Lock, Hold and Do report (a
// distlock.Observer) into OpenTelemetry metrics and spans.
//
//	obs, err := otelobserve.New(otelobserve.Options{
//		MeterProvider:  meterProvider,  // e.g. from go.opentelemetry.io/otel/sdk/metric
//		TracerProvider: tracerProvider, // e.g. from go.opentelemetry.io/otel/sdk/trace
//		Backend:        "redislock",
//	})
//	...
//	err = distlock.Do(ctx, locker, "nightly-report", &distlock.DoOptions{Observer: obs}, job)
//
// # Metrics
//
//   - distlock.acquire.duration (histogram, seconds): how long Lock or Do took to
//     acquire (or to give up), by distlock.outcome: acquired, locked (contention; the
//     caller gave up or TryLock found the key held), error.
//   - distlock.attempts (counter): TryLock attempts made by Lock and Do, by
//     distlock.outcome: acquired, locked, error. The locked ones are the contention.
//   - distlock.leases.held (up-down counter): leases kept alive by Hold (and Do) now.
//   - distlock.renewals (counter): renewals by Hold, by distlock.outcome: renewed, error.
//   - distlock.losses (counter): leases Hold gave up as lost.
//   - distlock.wait.duration (histogram, seconds): Lock's pauses between attempts.
//
// Keys are not metric attributes (they are unbounded); every instrument carries
// distlock.backend when Options.Backend is set.
//
// # Spans
//
// distlock.acquire, distlock.renew and distlock.release, each a child of the span in
// the caller's context, with distlock.key (cut to 64 bytes), distlock.fence and, for
// acquire, distlock.attempts; an error sets the span's status. The package builds
// each span when the operation ends, with its real start time. A loss is an event
// ("distlock.lost") on the span in Hold's context.
//
// There is no global state: pass the providers you want; a nil provider turns that
// signal off.
package otelobserve

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/keytext"
)

// ScopeName is the instrumentation scope of the meter and tracer.
const ScopeName = "github.com/distlock/distlock/otelobserve"

// Options configure New.
type Options struct {
	// MeterProvider receives the metrics; nil turns them off.
	MeterProvider metric.MeterProvider
	// TracerProvider receives the spans; nil turns them off.
	TracerProvider trace.TracerProvider
	// Backend, when set, is the distlock.backend attribute of every metric and span.
	Backend string
}

type observer struct {
	tracer trace.Tracer
	base   []attribute.KeyValue

	acquire  metric.Float64Histogram
	wait     metric.Float64Histogram
	attempts metric.Int64Counter
	held     metric.Int64UpDownCounter
	renewals metric.Int64Counter
	losses   metric.Int64Counter
}

// New returns an Observer that records what it sees into the providers of opts.
func New(opts Options) (distlock.Observer, error) {
	o := &observer{}
	if opts.Backend != "" {
		o.base = []attribute.KeyValue{attribute.String("distlock.backend", opts.Backend)}
	}
	if opts.TracerProvider != nil {
		o.tracer = opts.TracerProvider.Tracer(ScopeName)
	}
	if mp := opts.MeterProvider; mp != nil {
		m := mp.Meter(ScopeName)
		var errs []error
		add := func(err error) { errs = append(errs, err) }
		var err error
		o.acquire, err = m.Float64Histogram("distlock.acquire.duration", metric.WithUnit("s"),
			metric.WithDescription("Time Lock or Do took to acquire a key, or to give up."))
		add(err)
		o.wait, err = m.Float64Histogram("distlock.wait.duration", metric.WithUnit("s"),
			metric.WithDescription("Lock's pauses between attempts (a Waiter's Wait or a backoff)."))
		add(err)
		o.attempts, err = m.Int64Counter("distlock.attempts", metric.WithUnit("{attempt}"),
			metric.WithDescription("TryLock attempts made by Lock and Do; outcome locked is contention."))
		add(err)
		o.held, err = m.Int64UpDownCounter("distlock.leases.held", metric.WithUnit("{lease}"),
			metric.WithDescription("Leases kept alive by Hold now."))
		add(err)
		o.renewals, err = m.Int64Counter("distlock.renewals", metric.WithUnit("{renewal}"),
			metric.WithDescription("Renewals made by Hold."))
		add(err)
		o.losses, err = m.Int64Counter("distlock.losses", metric.WithUnit("{lease}"),
			metric.WithDescription("Leases Hold gave up as lost."))
		add(err)
		if err := errors.Join(errs...); err != nil {
			return distlock.Observer{}, fmt.Errorf("otelobserve: %w", err)
		}
	}
	return distlock.Observer{OnEvent: o.onEvent}, nil
}

// outcome classifies an error for the distlock.outcome attribute.
func outcome(err error, ok string) attribute.KeyValue {
	switch {
	case err == nil:
		return attribute.String("distlock.outcome", ok)
	case errors.Is(err, distlock.ErrLocked):
		return attribute.String("distlock.outcome", "locked")
	default:
		return attribute.String("distlock.outcome", "error")
	}
}

func (o *observer) attrs(extra ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributes(append(append([]attribute.KeyValue(nil), o.base...), extra...)...)
}

func (o *observer) onEvent(ctx context.Context, ev distlock.Event) {
	if o.acquire != nil {
		o.record(ctx, ev)
	}
	if o.tracer != nil {
		o.trace(ctx, ev)
	}
}

func (o *observer) record(ctx context.Context, ev distlock.Event) {
	switch ev.Op {
	case distlock.OpAttempt:
		o.attempts.Add(ctx, 1, o.attrs(outcome(ev.Err, "acquired")))
	case distlock.OpWait:
		o.wait.Record(ctx, ev.Took.Seconds(), o.attrs())
	case distlock.OpAcquire:
		o.acquire.Record(ctx, ev.Took.Seconds(), o.attrs(outcome(ev.Err, "acquired")))
	case distlock.OpHold:
		o.held.Add(ctx, 1, o.attrs())
	case distlock.OpRenew:
		o.renewals.Add(ctx, 1, o.attrs(outcome(ev.Err, "renewed")))
	case distlock.OpLost:
		o.losses.Add(ctx, 1, o.attrs())
		o.held.Add(ctx, -1, o.attrs())
	case distlock.OpRelease:
		o.held.Add(ctx, -1, o.attrs())
	}
}

func (o *observer) trace(ctx context.Context, ev distlock.Event) {
	var name string
	switch ev.Op {
	case distlock.OpAcquire:
		name = "distlock.acquire"
	case distlock.OpRenew:
		name = "distlock.renew"
	case distlock.OpRelease:
		name = "distlock.release"
	case distlock.OpLost:
		trace.SpanFromContext(ctx).AddEvent("distlock.lost", trace.WithAttributes(
			attribute.String("distlock.key", cut(ev.Key)), attribute.Int64("distlock.fence", int64(ev.Fence))))
		return
	default:
		return
	}
	end := time.Now()
	attrs := append([]attribute.KeyValue{attribute.String("distlock.key", cut(ev.Key))}, o.base...)
	if ev.Fence != 0 {
		attrs = append(attrs, attribute.Int64("distlock.fence", int64(ev.Fence)))
	}
	if ev.Op == distlock.OpAcquire {
		attrs = append(attrs, attribute.Int("distlock.attempts", ev.Attempt))
	}
	_, span := o.tracer.Start(ctx, name, trace.WithTimestamp(end.Add(-ev.Took)),
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	if ev.Err != nil {
		span.RecordError(ev.Err)
		span.SetStatus(codes.Error, ev.Err.Error())
	}
	span.End(trace.WithTimestamp(end))
}

// cut shortens a key for an attribute, at a character boundary.
func cut(key string) string {
	if len(key) <= keytext.Max {
		return key
	}
	n := keytext.Max
	for n > 0 && !utf8.RuneStart(key[n]) {
		n--
	}
	return key[:n]
}
