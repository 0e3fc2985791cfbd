package gateway

import (
	"net/http"
	"strings"

	"github.com/idemgateway/idemgateway/routes"
)

// What the gateway removes from every upstream request before it sets the upstream's own headers
// (docs/security.md#upstream-requests). httputil.ReverseProxy has already removed the hop-by-hop
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
