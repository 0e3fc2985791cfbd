package main

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// setupTracing builds the tracer provider for gateway.Options.TracerProvider from the standard
// OTEL_* environment variables, and installs it and the W3C propagators globally: process globals,
// which is why this lives in the command and not in package gateway. OTEL_TRACES_EXPORTER is one
// of otlp, console or none; unlike the SDK's own default (otlp), an unset OTEL_TRACES_EXPORTER
// means none here (docs/contract.md §1), and then tp is nil: no spans are made, at no cost. shutdown
// flushes and stops the exporter (a no-op when tp is nil).
func setupTracing(ctx context.Context) (tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	noop := func(context.Context) error { return nil }
	if os.Getenv("OTEL_TRACES_EXPORTER") == "" {
		return nil, noop, nil
	}
	exporter, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("OTEL_TRACES_EXPORTER: %w", err)
	}
	if autoexport.IsNoneSpanExporter(exporter) {
		return nil, noop, nil
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter))
	otel.SetTracerProvider(sdk)
	return sdk, sdk.Shutdown, nil
}
