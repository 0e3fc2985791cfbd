package gateway

import (
	"fmt"
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/routes"
)

// Upgrades and tunnels (docs/security.md#upgrades-and-tunnels). A connection that switches
// protocols (RFC 9110 §7.8) becomes a byte tunnel to the upstream: whatever the client sends on it
// passes no allow-list, no key and no max_body_bytes, on a connection whose first request carried
// the upstream's configured headers (its credentials). Only a route with upgrade: websocket (a
// read_only route) makes one. Elsewhere a request that asks for one is refused, Upgrade never
// reaches the upstream, and an upstream's 101 is answered 502 (modifyResponse); on every route the
// upstream's interim 1xx responses stay with the gateway (finalOnly).

// upgradeRefused says why rt refuses r's protocol upgrade (wrapping problem.ErrInvalidRequest), or nil when
// r asks for none (no "upgrade" in Connection) or asks for the protocol rt allows, once.
func upgradeRefused(rt *routes.Route, h http.Header) error {
	if !asksUpgrade(h) {
		return nil
	}
	if rt.Upgrade == "" {
		return fmt.Errorf("%w: Connection: upgrade: route %s allows no protocol upgrade", problem.ErrInvalidRequest, rt.Name)
	}
	if proto := h.Values("Upgrade"); len(proto) != 1 || !strings.EqualFold(strings.TrimSpace(proto[0]), rt.Upgrade) {
		return fmt.Errorf("%w: route %s allows an upgrade to %s alone, sent as one Upgrade header", problem.ErrInvalidRequest, rt.Name, rt.Upgrade)
	}
	return nil
}

// asksUpgrade reports whether a message's Connection header holds the "upgrade" option
// (case-insensitive, RFC 9110 §7.6.1), as httputil.ReverseProxy reads it.
func asksUpgrade(h http.Header) bool {
	return httpguts.HeaderValuesContainsToken(h["Connection"], "upgrade")
}

// finalOnly is the ResponseWriter the reverse proxy answers through. It drops interim (1xx)
// responses, which httputil.ReverseProxy relays as the upstream sends them (RFC 9110 §15.2): the
// client gets the final answer only, as a replay would. Until that answer, the proxy's headers
// collect apart (the proxy clears the map after each interim response, which would take the
// gateway's own headers with it) and join the response's at WriteHeader. Unwrap lets
// http.ResponseController reach Flush and, for an allowed upgrade, Hijack.
type finalOnly struct {
	http.ResponseWriter
	header http.Header // the proxy's, until the final status is written
	wrote  bool
}

func newFinalOnly(w http.ResponseWriter) *finalOnly {
	return &finalOnly{ResponseWriter: w, header: make(http.Header)}
}

func (w *finalOnly) Header() http.Header {
	if w.wrote {
		return w.ResponseWriter.Header()
	}
	return w.header
}

func (w *finalOnly) WriteHeader(code int) {
	if !w.wrote {
		if code >= 100 && code <= 199 {
			return
		}
		h := w.ResponseWriter.Header()
		for name, values := range w.header {
			h[name] = append(h[name], values...)
		}
		w.wrote = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *finalOnly) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *finalOnly) Unwrap() http.ResponseWriter { return w.ResponseWriter }
