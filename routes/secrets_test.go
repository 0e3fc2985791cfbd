package routes

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSecretsRedacted(t *testing.T) {
	t.Parallel()
	cfg, err := parseFile(t, "full.good.yml")
	if err != nil {
		t.Fatal(err)
	}
	u := cfg.Upstreams["tickets"]
	// The values are there for the proxy ...
	if got := u.Headers.Header().Get("Authorization"); got != "Bearer s3cr3t-tickets-token" {
		t.Fatalf("Header().Get(Authorization) = %q", got)
	}
	// ... and nowhere else.
	values := map[string]any{
		"Upstream":  u,
		"*Upstream": *u,
		"Config":    cfg,
		"*Config":   *cfg,
		"Route":     *cfg.Routes[0],
		"Secrets":   u.Headers,
		"Upstreams": cfg.Upstreams,
	}
	for name, v := range values {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
			t.Run(name+" "+verb, func(t *testing.T) {
				t.Parallel()
				assertNoSecret(t, fmt.Sprintf(verb, v))
			})
		}
		t.Run(name+" json", func(t *testing.T) {
			t.Parallel()
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			assertNoSecret(t, string(b))
		})
		t.Run(name+" slog", func(t *testing.T) {
			t.Parallel()
			var b strings.Builder
			slog.New(slog.NewJSONHandler(&b, nil)).Info("x", "v", v)
			slog.New(slog.NewTextHandler(&b, nil)).Info("x", "v", v)
			assertNoSecret(t, b.String())
		})
	}
}

func TestSecretsFormat(t *testing.T) {
	t.Parallel()
	s := Secrets{"Authorization": {"Bearer x"}, "X-Api-Key": {"k"}}
	tests := []struct {
		name, format string
		value        any
		want         string
	}{
		{"String", "%v", s, "Authorization: [redacted], X-Api-Key: [redacted]"},
		{"plus", "%+v", s, "Authorization: [redacted], X-Api-Key: [redacted]"},
		{"GoString", "%#v", s, `routes.Secrets{"Authorization": {"[redacted]"}, "X-Api-Key": {"[redacted]"}}`},
		{"quoted", "%q", s, `"Authorization: [redacted], X-Api-Key: [redacted]"`},
		{"nil", "%v", Secrets(nil), ""},
		{"nil GoString", "%#v", Secrets(nil), "routes.Secrets(nil)"},
		{"in a struct", "%+v", Upstream{Name: "u", Headers: s}, "{Name:u URL:<nil> Timeout:0s StripPrefix: Headers:Authorization: [redacted], X-Api-Key: [redacted] ForwardKey: MCP:<nil>}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := fmt.Sprintf(tt.format, tt.value); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestSecretsHeaderIsACopy(t *testing.T) {
	t.Parallel()
	s := Secrets{"Authorization": {"a"}}
	h := s.Header()
	h.Set("Authorization", "b")
	h.Add("X-Other", "c")
	if got := s["Authorization"]; !slices.Equal(got, []string{"a"}) || len(s) != 1 {
		t.Errorf("Secrets changed through Header(): %#v", map[string][]string(s))
	}
}

func TestExpandEnv(t *testing.T) {
	t.Parallel()
	env := func(name string) (string, bool) {
		v, ok := map[string]string{"A": "1", "B_2": "two", "EMPTY": ""}[name]
		return v, ok
	}
	secretFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(secretFile, []byte("s3cret-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, in, want string
		wantErrs       []string
	}{
		{name: "no reference", in: "plain", want: "plain"},
		{name: "one", in: "Bearer ${A}", want: "Bearer 1"},
		{name: "several", in: "${A}-${B_2}${A}", want: "1-two1"},
		{name: "set but empty", in: "x${EMPTY}y", want: "xy"},
		{name: "bare dollar stays", in: "$A $ ${A}$", want: "$A $ 1$"},
		{name: "dollar before reference", in: "$${A}", want: "$1"},
		{name: "unset", in: "${A} ${NOPE} ${NOPE2}", want: "1  ",
			wantErrs: []string{"environment variable NOPE is not set", "environment variable NOPE2 is not set"}},
		{name: "unterminated", in: "x ${A", want: "x ",
			wantErrs: []string{"unterminated ${ reference; want ${NAME}"}},
		{name: "mounted file", in: "Bearer ${file:" + secretFile + "}", want: "Bearer s3cret-from-file"},
		{name: "missing file", in: "${file:/nonexistent/token}", want: "",
			wantErrs: []string{"${file:/nonexistent/token}: no such file or directory"}},
		{name: "malformed", in: "${} ${1A} ${A-B} ${A}", want: "   1",
			wantErrs: slices.Repeat([]string{"malformed ${...} reference; want ${NAME}, NAME of letters, digits and underscores, or ${file:/PATH}"}, 3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, errs := expandEnv(tt.in, env)
			var gotErrs []string
			for _, err := range errs {
				gotErrs = append(gotErrs, err.Error())
			}
			if got != tt.want || !slices.Equal(gotErrs, tt.wantErrs) {
				t.Errorf("expandEnv(%q) = %q, %q; want %q, %q", tt.in, got, gotErrs, tt.want, tt.wantErrs)
			}
		})
	}
}

func TestDisplayURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"plain", "http://h:80/a@b", "http://h:80/a@b"},
		{"user and password", "https://admin:hunter2@h/x", "https://[redacted]@h/x"},
		{"user only", "https://tok@h", "https://[redacted]@h"},
		{"unparsable", "http://u:p%zz@h:port/", "http://[redacted]@h:port/"},
		{"no scheme", "user:pass@host", "[redacted]@host"},
		{"@ in query", "http://h?a=b@c", "http://h?a=b@c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := displayURL(tt.in); got != tt.want {
				t.Errorf("displayURL(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	cause := errors.New("cause")
	errs := Errors{
		&FieldError{File: "r.yaml", Field: "routes[0]: path", Err: cause},
		&FieldError{File: "r.yaml", Line: 3, Err: errors.New("bad")},
	}
	if got, want := errs.Error(), "r.yaml: routes[0]: path: cause\nr.yaml:3: bad"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(error(errs), cause) {
		t.Error("errors.Is does not find the cause")
	}
	var fe *FieldError
	if !errors.As(error(errs), &fe) || fe.Field != "routes[0]: path" {
		t.Errorf("errors.As = %v", fe)
	}
}
