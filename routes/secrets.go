package routes

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
)

// redacted stands for every value of a Secrets header when it is printed.
const redacted = "[redacted]"

// Header returns a copy of the headers, values included, for the proxy to set on upstream
// requests. Names are in canonical form (http.CanonicalHeaderKey). Never log it.
func (s Secrets) Header() http.Header { return http.Header(s).Clone() }

// names returns the header names, sorted.
func (s Secrets) names() []string { return slices.Sorted(maps.Keys(s)) }

// String returns the header names with their values redacted, sorted by name:
// "Authorization: [redacted], X-Api-Key: [redacted]".
func (s Secrets) String() string {
	var b strings.Builder
	for i, name := range s.names() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(name)
		b.WriteString(": ")
		b.WriteString(redacted)
	}
	return b.String()
}

// GoString returns a Go-syntax form with the values redacted, for %#v:
// routes.Secrets{"Authorization": {"[redacted]"}}.
func (s Secrets) GoString() string {
	if s == nil {
		return "routes.Secrets(nil)"
	}
	var b strings.Builder
	b.WriteString("routes.Secrets{")
	for i, name := range s.names() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(name))
		b.WriteString(`: {"` + redacted + `"}`)
	}
	b.WriteString("}")
	return b.String()
}

// Format makes every fmt verb print the redacted form: %#v prints GoString, %q the quoted
// String, and any other verb (%v, %+v, %s, %d, %x, ...) prints String. Without it, verbs that
// fmt does not route to String (such as %d) would print the map with its values.
func (s Secrets) Format(f fmt.State, verb rune) {
	switch {
	case verb == 'v' && f.Flag('#'):
		io.WriteString(f, s.GoString())
	case verb == 'q':
		io.WriteString(f, strconv.Quote(s.String()))
	default:
		io.WriteString(f, s.String())
	}
}

// MarshalJSON encodes the headers with their values redacted, so that a Config encoded as JSON
// (by slog's JSONHandler, say) does not carry them: {"Authorization":["[redacted]"]}.
func (s Secrets) MarshalJSON() ([]byte, error) {
	if s == nil {
		return []byte("null"), nil
	}
	m := make(map[string][]string, len(s))
	for name := range s {
		m[name] = []string{redacted}
	}
	return json.Marshal(m)
}

// expandEnv replaces every ${NAME} in value with the variable NAME read through lookupEnv. NAME
// is a letter or underscore followed by letters, digits and underscores. A "$" not followed by
// "{" is kept as it is. It returns one error per unset variable or malformed reference; the
// errors name variables but never quote the value, which may be a credential.
func expandEnv(value string, lookupEnv func(string) (string, bool)) (string, []error) {
	var (
		b    strings.Builder
		errs []error
	)
	for {
		i := strings.Index(value, "${")
		if i < 0 {
			b.WriteString(value)
			break
		}
		b.WriteString(value[:i])
		value = value[i+2:]
		end := strings.IndexByte(value, '}')
		if end < 0 {
			errs = append(errs, fmt.Errorf("unterminated ${ reference; want ${NAME}"))
			break
		}
		name := value[:end]
		value = value[end+1:]
		if path, ok := strings.CutPrefix(name, "file:"); ok {
			// A mounted secret (Kubernetes Secret volume, Docker secret): the file's content,
			// less a final line break.
			data, err := os.ReadFile(path)
			if err != nil {
				errs = append(errs, fmt.Errorf("${file:%s}: %w", path, errors.Unwrap(err)))
				continue
			}
			b.WriteString(strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r"))
			continue
		}
		if !isEnvName(name) {
			errs = append(errs, fmt.Errorf("malformed ${...} reference; want ${NAME}, NAME of letters, digits and underscores, or ${file:/PATH}"))
			continue
		}
		v, ok := lookupEnv(name)
		if !ok {
			errs = append(errs, fmt.Errorf("environment variable %s is not set", name))
			continue
		}
		b.WriteString(v)
	}
	return b.String(), errs
}

// isEnvName reports whether s is a letter or underscore followed by letters, digits and
// underscores.
func isEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range []byte(s) {
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// Format prints u like fmt prints a struct, with Headers redacted whatever the verb. Without it,
// a verb that does not suit a pointer (%s, %q) makes fmt print a *Upstream met inside another
// value (a Route, a Config) without calling the methods of its fields, values and all.
func (u Upstream) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		fmt.Fprintf(f, "routes.Upstream{Name:%q, URL:%#v, Timeout:%d, StripPrefix:%q, Headers:%#v, ForwardKey:%q}",
			u.Name, u.URL, u.Timeout, u.StripPrefix, u.Headers, u.ForwardKey)
		return
	}
	type fields Upstream // the same fields without the methods, so that fmt does not recurse
	fmt.Fprintf(f, fmt.FormatString(f, verb), fields(u))
}
