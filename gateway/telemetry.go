package gateway

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// SetupTracing builds the tracer provider for Options.TracerProvider from the standard OTEL_*
// environment variables, and installs it and the W3C propagators globally. OTEL_TRACES_EXPORTER is
// one of otlp, console or none; unlike the SDK's own default (otlp), an unset OTEL_TRACES_EXPORTER
// means none here (contract §1), and then tp is nil: no spans are made, at no cost. shutdown
// flushes and stops the exporter (a no-op when tp is nil).
func SetupTracing(ctx context.Context) (tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
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

// queryRedacted is the tracer provider of the upstream client spans (otelhttp's transport): the
// span's url.full keeps the query's parameter names and replaces each value by REDACTED, since a
// query may carry a credential (?api_key=...) that the client sent (docs/security.md#error-details).
// The request the upstream gets is unchanged.
type queryRedacted struct{ trace.TracerProvider }

func (p queryRedacted) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return queryRedactedTracer{p.TracerProvider.Tracer(name, opts...)}
}

type queryRedactedTracer struct{ trace.Tracer }

func (t queryRedactedTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx, span := t.Tracer.Start(ctx, name, opts...)
	return ctx, queryRedactedSpan{span}
}

type queryRedactedSpan struct{ trace.Span }

// attrURLFull is the client span's URL (OpenTelemetry semantic conventions, url.full).
const attrURLFull = attribute.Key("url.full")

func (s queryRedactedSpan) SetAttributes(kv ...attribute.KeyValue) {
	for i, a := range kv {
		if a.Key == attrURLFull {
			kv[i] = attrURLFull.String(redactQuery(a.Value.AsString()))
		}
	}
	s.Span.SetAttributes(kv...)
}

// redactQuery returns rawURL with the value of every query parameter replaced by REDACTED, names
// and order kept as sent: "/t?api_key=s3cret&x" becomes "/t?api_key=REDACTED&x". The fragment, if
// any, is dropped.
func redactQuery(rawURL string) string {
	rawURL, _, _ = strings.Cut(rawURL, "#")
	base, query, ok := strings.Cut(rawURL, "?")
	if !ok || query == "" {
		return rawURL
	}
	params := strings.Split(query, "&")
	for i, p := range params {
		if name, _, hasValue := strings.Cut(p, "="); hasValue {
			params[i] = name + "=REDACTED"
		}
	}
	return base + "?" + strings.Join(params, "&")
}
