package otelobserve_test

import (
	"context"
	"fmt"
	"log"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/memlock"
	"github.com/distlock/distlock/otelobserve"
)

// Wire distlock into OpenTelemetry: pass the Observer in the options of Lock, Hold
// or Do. Here the providers are the SDK's, with a manual reader to print one metric;
// in production they come from your telemetry setup and export over OTLP.
func ExampleNew() {
	reader := sdkmetric.NewManualReader()
	obs, err := otelobserve.New(otelobserve.Options{
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
		TracerProvider: sdktrace.NewTracerProvider(),
		Backend:        "memlock",
	})
	if err != nil {
		log.Fatal(err)
	}
	locker := memlock.New()
	defer locker.Close()
	err = distlock.Do(context.Background(), locker, "nightly-report",
		&distlock.DoOptions{TTL: 10 * time.Second, Observer: obs},
		func(ctx context.Context) error { return nil })
	if err != nil {
		log.Fatal(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		log.Fatal(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name == "distlock.attempts" {
			fmt.Println(m.Name, m.Data.(metricdata.Sum[int64]).DataPoints[0].Value)
		}
	}
	// Output: distlock.attempts 1
}
