package gateway

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/routes"
)

// checkPathParams refuses a path parameter that an upstream could read as another path
// (docs/security.md#input-bounds): one whose decoded value holds "/", "\", "?", "#", NUL or
// another control byte, or is not UTF-8 (an overlong "%c0%ae" reads as "." to lax decoders), or
// that is "." or ".." once its ";" parameters are removed ("..;x", which Tomcat resolves). A
// trailing wildcard ("*") spans segments: each is checked. Parameters the route names in
// opaque_path_params are not checked. Errors wrap problem.ErrInvalidRequest.
func checkPathParams(rt *routes.Route, r *http.Request) error {
	rc := chi.RouteContext(r.Context())
	if rc == nil {
		return nil
	}
	for i, name := range rc.URLParams.Keys {
		if slices.Contains(rt.OpaquePathParams, name) {
			continue
		}
		segments := []string{rc.URLParams.Values[i]}
		if name == "*" {
			segments = strings.Split(segments[0], "/")
		}
		for _, seg := range segments {
			if r.URL.RawPath != "" { // chi matched the escaped path (see pathParams)
				seg, _ = url.PathUnescape(seg) // RawPath is valid escaping: no error
			}
			if why := badSegment(seg); why != "" {
				return fmt.Errorf("%w: path parameter %s %s; a route may allow it with opaque_path_params", problem.ErrInvalidRequest, name, why)
			}
		}
	}
	return nil
}

// badSegment says what makes the decoded path segment s unsafe to forward, or "".
func badSegment(s string) string {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '/', c == '\\', c == '?', c == '#':
			return fmt.Sprintf("holds %q", c)
		case c < 0x20 || c == 0x7f:
			return fmt.Sprintf("holds the control byte %#02x", c)
		}
	}
	if !utf8.ValidString(s) {
		return "is not UTF-8"
	}
	if name, _, _ := strings.Cut(s, ";"); name == "." || name == ".." {
		return "is a dot-segment once its ';' parameters are removed"
	}
	return ""
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
