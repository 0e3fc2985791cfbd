package admin

import (
	"crypto/subtle"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/idemgateway/idemgateway/problem"
)

// CheckHost wraps an admin handler so that it answers only requests whose Host header (RFC 9110
// §7.2) names the listener (docs/security.md#admin-listener). It stops DNS rebinding: a page of
// attacker.example, whose name the attacker then points at 127.0.0.1, would otherwise reach the
// admin listener from an operator's browser with Host: attacker.example. A Host is accepted when
// its host is
//
//   - an IP address: no DNS answer can rebind it (and probes and scrapers address pods by IP);
//   - localhost (RFC 6761 §6.3);
//   - the host of listen, the listener's address, when it is a name;
//   - one of names: the names under which the operator serves the listener.
//
// Names are compared without regard to case or a final dot; the port is not compared. Any other
// Host, or none, gets 421 misdirected-request (RFC 9110 §15.5.20). An entry of names that is not a
// bare host name (a port, a scheme, a path) is an error.
func CheckHost(next http.Handler, listen string, names []string) (http.Handler, error) {
	allowed := map[string]bool{"localhost": true}
	if host, _, err := net.SplitHostPort(listen); err == nil && host != "" {
		if _, err := netip.ParseAddr(host); err != nil {
			allowed[normalHost(host)] = true
		}
	}
	for _, name := range names {
		name = strings.TrimSpace(name)
		if name == "" || strings.ContainsAny(name, ":/@?#[] \t") {
			return nil, fmt.Errorf("admin host %q: want a host name without port, scheme or path", name)
		}
		allowed[normalHost(name)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := hostOf(r.Host)
		if _, err := netip.ParseAddr(host); err == nil || (host != "" && allowed[normalHost(host)]) {
			next.ServeHTTP(w, r)
			return
		}
		(&problem.Problem{Type: problem.TypePrefix + "misdirected-request", Title: "Misdirected request", Status: http.StatusMisdirectedRequest,
			Detail: fmt.Sprintf("the admin listener does not answer for the host %q: address it by IP, localhost, or a name it is configured with", r.Host)}).Write(w, 0)
	}), nil
}

// hostOf is the host of a Host header: without its port, an IPv6 address without its brackets.
func hostOf(hostport string) string {
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		return host
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

func normalHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// requireJSON refuses a request of the records API that sends a body (POST, PUT, PATCH) as
// anything but application/json (RFC 8259 §11) with 415: a page in a browser can send text/plain,
// a form or multipart to another origin without asking it first (a CORS-simple request), but not
// application/json (docs/security.md#admin-listener).
func requireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch:
			if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
				(&problem.Problem{Type: problem.TypePrefix + "unsupported-media-type", Title: "Unsupported media type", Status: http.StatusUnsupportedMediaType,
					Detail: fmt.Sprintf("the records API takes Content-Type: application/json, not %q", r.Header.Get("Content-Type"))}).Write(w, 0)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// requireBearer refuses a request of the records API without the bearer token, when there is one,
// with 401 unauthorized. Space around the token is not part of it, on either side; a token of
// spaces alone admits nobody.
func requireBearer(token string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if token == "" {
			return next
		}
		want := []byte(strings.TrimSpace(token)) // as the received token is: a secret file's final newline is not part of it
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
			// The scheme is case-insensitive (RFC 9110 §11.1); the token is compared in constant time.
			if len(want) == 0 || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), want) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="idemgateway-admin"`)
				(&problem.Problem{Type: problem.TypePrefix + "unauthorized", Title: "Unauthorized", Status: http.StatusUnauthorized,
					Detail: "the records API needs the admin bearer token"}).Write(w, 0)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
