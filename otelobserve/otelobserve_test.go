package otelobserve_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/memlock"
	"github.com/distlock/distlock/otelobserve"
)

type signals struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	obs    distlock.Observer
}

func newSignals(t *testing.T) *signals {
	s := &signals{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	s.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.spans))
	obs, err := otelobserve.New(otelobserve.Options{
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.reader)),
		TracerProvider: s.tp,
		Backend:        "memlock",
	})
	require.NoError(t, err)
	s.obs = obs
	return s
}

// sums returns each counter's data points as "name outcome" -> value.
func (s *signals) sums(t *testing.T) map[string]int64 {
	var rm metricdata.ResourceMetrics
	require.NoError(t, s.reader.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					o, _ := p.Attributes.Value("distlock.outcome")
					be, _ := p.Attributes.Value("distlock.backend")
					require.Equal(t, "memlock", be.AsString(), m.Name)
					out[m.Name+" "+o.AsString()] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					o, _ := p.Attributes.Value("distlock.outcome")
					out[m.Name+" "+o.AsString()] += int64(p.Count)
				}
			}
		}
	}
	return out
}

func TestContendedDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSignals(t)
		l := memlock.New()
		held, err := l.TryLock(t.Context(), "job", time.Hour)
		require.NoError(t, err)
		go func() {
			time.Sleep(100 * time.Millisecond)
			_ = l.Unlock(context.Background(), held)
		}()
		ctx, parent := s.tp.Tracer("test").Start(t.Context(), "request")
		err = distlock.Do(ctx, l, "job", &distlock.DoOptions{Wait: true, TTL: 300 * time.Millisecond, Observer: s.obs},
			func(context.Context) error {
				time.Sleep(250 * time.Millisecond) // two renewals
				return nil
			})
		require.NoError(t, err)
		parent.End()

		require.Equal(t, map[string]int64{
			"distlock.attempts locked":           1,
			"distlock.attempts acquired":         1,
			"distlock.wait.duration ":            1,
			"distlock.acquire.duration acquired": 1,
			"distlock.leases.held ":              0,
			"distlock.renewals renewed":          2,
		}, s.sums(t))

		byName := map[string]sdktrace.ReadOnlySpan{}
		for _, sp := range s.spans.Ended() {
			byName[sp.Name()] = sp
		}
		acq := byName["distlock.acquire"]
		require.NotNil(t, acq)
		require.Equal(t, parent.SpanContext().SpanID(), acq.Parent().SpanID(), "spans are children of the caller's span")
		require.Equal(t, 100*time.Millisecond, acq.EndTime().Sub(acq.StartTime()), "the span covers the wait")
		require.NotNil(t, byName["distlock.release"])
		require.NotNil(t, byName["distlock.renew"])
	})
}

func TestLossIsCountedAndMarked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSignals(t)
		l := memlock.New()
		ctx, parent := s.tp.Tracer("test").Start(t.Context(), "job")
		err := distlock.Do(ctx, l, "job", &distlock.DoOptions{TTL: time.Second, Observer: s.obs},
			func(ctx context.Context) error {
				l.Revoke("job")
				<-ctx.Done()
				return nil
			})
		require.ErrorIs(t, err, distlock.ErrNotHeld)
		parent.End()
		sums := s.sums(t)
		require.Equal(t, int64(1), sums["distlock.losses "])
		require.Equal(t, int64(0), sums["distlock.leases.held "])
		var lost bool
		for _, sp := range s.spans.Ended() {
			for _, ev := range sp.Events() {
				lost = lost || ev.Name == "distlock.lost"
			}
		}
		require.True(t, lost, "a distlock.lost event on the caller's span")
	})
}

func TestFailedAcquireSetsErrorStatus(t *testing.T) {
	s := newSignals(t)
	l := memlock.New()
	_, err := l.TryLock(t.Context(), "job", time.Hour)
	require.NoError(t, err)
	err = distlock.Do(t.Context(), l, "job", &distlock.DoOptions{Observer: s.obs}, func(context.Context) error { return nil })
	require.ErrorIs(t, err, distlock.ErrLocked)
	require.Equal(t, int64(1), s.sums(t)["distlock.acquire.duration locked"])
	spans := s.spans.Ended()
	require.Len(t, spans, 1)
	require.Equal(t, codes.Error, spans[0].Status().Code)
}

func TestNilProvidersObserveNothing(t *testing.T) {
	obs, err := otelobserve.New(otelobserve.Options{})
	require.NoError(t, err)
	require.NoError(t, distlock.Do(t.Context(), memlock.New(), "k", &distlock.DoOptions{Observer: obs}, func(context.Context) error { return nil }))
}
