package routes

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"
)

// checkPattern reports why path is not a route pattern the gateway can serve, or nil. A pattern
// starts with "/", holds no white space, control character, "?" or "#", has balanced braces and
// unique, non-empty parameter names, and is accepted by chi (a valid {name:regexp}, a "*" only at
// the end).
func checkPattern(path string) error {
	if !strings.HasPrefix(path, "/") {
		return errors.New(`must start with "/"`)
	}
	for _, c := range []byte(path) {
		if c <= ' ' || c == 0x7f || c == '?' || c == '#' {
			return errors.New(`must not contain white space, control characters, "?" or "#"`)
		}
	}
	if err := checkParams(path); err != nil {
		return err
	}
	return chiAccepts(path)
}

// checkParams checks the braces of path and the names of its {name} and {name:regexp} parameters.
func checkParams(path string) error {
	_, err := params(path)
	return err
}

// paramNames returns the names of path's parameters in order, and "*" when it ends with a
// wildcard. path must have passed checkParams.
func paramNames(path string) []string {
	names, _ := params(path)
	if strings.HasSuffix(path, "*") {
		names = append(names, "*")
	}
	return names
}

// params scans path's braces once: the names of its {name} and {name:regexp} parameters in
// order, or why they are not well formed (unbalanced braces, a name that is empty, holds "{",
// "}", "/" or "*", or is used twice).
func params(path string) ([]string, error) {
	var names []string
	depth, start := 0, 0
	for i, c := range []byte(path) {
		switch c {
		case '{':
			if depth == 0 {
				start = i
			}
			depth++
		case '}':
			if depth == 0 {
				return nil, fmt.Errorf(`unbalanced "}" at byte %d`, i)
			}
			depth--
			if depth > 0 {
				continue
			}
			name, _, _ := strings.Cut(path[start+1:i], ":")
			if name == "" {
				return nil, fmt.Errorf("parameter at byte %d has no name", start)
			}
			if strings.ContainsAny(name, "{}/*") {
				return nil, fmt.Errorf(`parameter name %q contains "{", "}", "/" or "*"`, name)
			}
			if slices.Contains(names, name) {
				return nil, fmt.Errorf("duplicate parameter %q", name)
			}
			names = append(names, name)
		}
	}
	if depth > 0 {
		return nil, fmt.Errorf(`unclosed "{" at byte %d`, start)
	}
	return names, nil
}

// chiAccepts registers path on a throwaway chi router and turns chi's panic, if any, into an
// error.
func chiAccepts(path string) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("not a valid chi pattern: %s", strings.TrimPrefix(fmt.Sprint(v), "chi: "))
		}
	}()
	chi.NewRouter().Method(http.MethodGet, path, http.NotFoundHandler())
	return nil
}

// patternKey returns path with its parameter names removed ("/v1/{id}" and "/v1/{ticket}" both
// become "/v1/{}"; a regexp stays: "/v1/{:[0-9]+}"), so that two patterns that route the same
// requests compare equal. path must have passed checkParams.
func patternKey(path string) string {
	var b strings.Builder
	depth := 0
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch {
		case c == '{' && depth == 0:
			depth++
			b.WriteByte('{')
			// Skip the name, keep ":regexp" if any.
			j := i + 1
			for j < len(path) && path[j] != ':' && path[j] != '}' {
				j++
			}
			i = j - 1
		case c == '{':
			depth++
			b.WriteByte(c)
		case c == '}':
			depth--
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// PathParams returns the path parameters chi matched, each decoded exactly once. chi matches the
// escaped path (r.URL.RawPath) when the URL has one, and the decoded path otherwise (Go keeps no
// RawPath when escaping the decoded path gives the original back): so /t/a%2Fb gives "a/b",
// /t/a%252Fb gives "a%2Fb", and /t/%41 and /t/A both give "A".
func PathParams(r *http.Request) map[string]string {
	rc := chi.RouteContext(r.Context())
	if rc == nil || len(rc.URLParams.Keys) == 0 {
		return nil
	}
	params := make(map[string]string, len(rc.URLParams.Keys))
	for i, k := range rc.URLParams.Keys {
		v := rc.URLParams.Values[i]
		if r.URL.RawPath != "" {
			if u, err := url.PathUnescape(v); err == nil { // RawPath is valid escaping: no error
				v = u
			}
		}
		params[k] = v
	}
	return params
}
