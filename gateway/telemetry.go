package gateway

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

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
