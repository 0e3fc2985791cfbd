package routes

import "testing"

func TestCheckPattern(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, path, wantErr string }{
		{name: "root", path: "/"},
		{name: "static", path: "/v1/tickets"},
		{name: "params", path: "/v1/{org}/tickets/{id}"},
		{name: "regexp", path: "/v1/{id:[0-9]{3}}"},
		{name: "wildcard", path: "/files/*"},
		{name: "relative", path: "v1", wantErr: `must start with "/"`},
		{name: "space", path: "/a b", wantErr: `must not contain white space, control characters, "?" or "#"`},
		{name: "query", path: "/a?b", wantErr: `must not contain white space, control characters, "?" or "#"`},
		{name: "stray close", path: "/a}", wantErr: `unbalanced "}" at byte 2`},
		{name: "unclosed", path: "/a/{id", wantErr: `unclosed "{" at byte 3`},
		{name: "empty name", path: "/a/{}", wantErr: "parameter at byte 3 has no name"},
		{name: "empty name with regexp", path: "/a/{:[0-9]+}", wantErr: "parameter at byte 3 has no name"},
		{name: "duplicate", path: "/{id}/{id:[a-z]+}", wantErr: `duplicate parameter "id"`},
		{name: "slash in name", path: "/{a/b}", wantErr: `parameter name "a/b" contains "{", "}", "/" or "*"`},
		{name: "wildcard not last", path: "/a/*/b", wantErr: "not a valid chi pattern: wildcard '*' must be the last value in a route. trim trailing text or use a '{param}' instead"},
		{name: "bad regexp", path: "/{id:[0-9}", wantErr: "not a valid chi pattern: invalid regexp pattern '^[0-9$' in route param"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := checkPattern(tt.path)
			var got string
			if err != nil {
				got = err.Error()
			}
			if got != tt.wantErr {
				t.Errorf("checkPattern(%q) = %q, want %q", tt.path, got, tt.wantErr)
			}
		})
	}
}

func TestPatternKey(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, path, want string }{
		{"static", "/v1/tickets", "/v1/tickets"},
		{"param", "/v1/{id}/x/{name}", "/v1/{}/x/{}"},
		{"regexp", "/v1/{id:[0-9]{3}}", "/v1/{:[0-9]{3}}"},
		{"wildcard", "/files/*", "/files/*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := patternKey(tt.path); got != tt.want {
				t.Errorf("patternKey(%q) = %q, want %q", tt.path, got, tt.want)
			}
		})
	}
}
