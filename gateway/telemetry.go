package gateway

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// SetupTracing installs the global OpenTelemetry tracer provider and propagator from the standard
// OTEL_* environment variables. OTEL_TRACES_EXPORTER is one of otlp, console or none; unlike the
// SDK's own default (otlp), an unset OTEL_TRACES_EXPORTER means none here (contract §1), and then
// no SDK provider is installed at all: spans nobody exports are not recorded. The returned function
// flushes and stops the exporter.
func SetupTracing(ctx context.Context) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	noop := func(context.Context) error { return nil }
	if os.Getenv("OTEL_TRACES_EXPORTER") == "" {
		return noop, nil // no exporter: the global no-op provider records nothing, at no cost
	}
	exporter, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER: %w", err)
	}
	if autoexport.IsNoneSpanExporter(exporter) {
		return noop, nil
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}
