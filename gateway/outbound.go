package gateway

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgateway/idemgateway/routes"
)

// What reaches an upstream, and what its client span shows of it: the headers the gateway removes
// from every upstream request (docs/security.md#upstream-requests), and the query values it
// redacts from the span (queryRedacted).
//
// The gateway removes headers before it sets the upstream's own. httputil.ReverseProxy has already removed the hop-by-hop
// headers (RFC 9110 §7.6.1), Upgrade among them, Forwarded and X-Forwarded-*; it sets Connection
// and Upgrade again only for a request that asked for an upgrade, which gets this far on a route
// with upgrade alone (upgradeRefused).

// ambiguousHeaders are request headers an upstream may act on that the gateway does not see as
// the upstream does: a client address it never checked, and method overrides that would turn a
// read_only GET into a DELETE upstream.
var ambiguousHeaders = map[string]bool{
	"X-Real-Ip":              true,
	"X-Http-Method-Override": true,
	"X-Method-Override":      true,
	"X-Http-Method":          true,
}

// cleanOutbound removes from out, the upstream request of a call on rt, what the client must not
// send the upstream, on every route class:
//
//   - request trailers, which the transport would send after the body and announce in a Trailer
//     header of its own: an upstream (or a proxy before it) that merges trailers into the header
//     section would read a client's Authorization, Host or tenant there;
//   - header names holding "_": CGI and WSGI servers read X_Tenant_ID as X-Tenant-ID, which the
//     gateway read as another header;
//   - X-Real-IP and the method-override headers (ambiguousHeaders);
//   - the client's key header (rt.Key.Header): an upstream that de-duplicates by it would match
//     two tenants' keys; the upstream gets the scoped key on forward_key only;
//   - a client-sent forward_key header: only an execution under a key sends it.
//
// The upstream's configured headers overwrite a client's of the same name after this. Names are
// compared in canonical form, whatever form the map holds them in.
func cleanOutbound(out *http.Request, rt *routes.Route) {
	out.Trailer = nil
	for name := range out.Header {
		if strings.ContainsRune(name, '_') || outboundDropped(rt, http.CanonicalHeaderKey(name)) {
			delete(out.Header, name)
		}
	}
}

// outboundDropped reports whether cleanOutbound drops the header canon (canonical form) on rt.
func outboundDropped(rt *routes.Route, canon string) bool {
	return canon == rt.Key.Header || canon == rt.Upstream.ForwardKey || ambiguousHeaders[canon]
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

// canonicalPath re-encodes u's escaped path one segment at a time, each as Go writes a decoded
// path (url.URL.EscapedPath) with "/" escaped, so that the upstream gets one spelling of each
// path: "%41" becomes "A", "%c3%a9" "%C3%A9", and an escaped "/" in an opaque path parameter
// stays "%2F", inside its segment. A path Go keeps no escaped form of is already written so.
func canonicalPath(u *url.URL) {
	if u.RawPath == "" {
		return
	}
	segments := strings.Split(u.RawPath, "/")
	for i, seg := range segments {
		decoded, err := url.PathUnescape(seg)
		if err != nil {
			return // not reached: Go keeps RawPath only when it is valid escaping
		}
		segments[i] = strings.ReplaceAll((&url.URL{Path: decoded}).EscapedPath(), "/", "%2F")
	}
	u.RawPath = strings.Join(segments, "/")
	if u.RawPath == (&url.URL{Path: u.Path}).EscapedPath() {
		u.RawPath = ""
	}
}
