package routes

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestYAMLToJSON(t *testing.T) {
	t.Parallel()
	tests := []struct{ yaml, want, wantErr string }{
		{yaml: `{}`, want: `{}`},
		{yaml: `[]`, want: `[]`},
		{yaml: `~`, want: `null`},
		{yaml: `null`, want: `null`},
		{yaml: `true`, want: `true`},
		{yaml: `false`, want: `false`},
		{yaml: `"true"`, want: `"true"`},
		{yaml: `yes`, want: `"yes"`}, // YAML 1.2: a string
		{yaml: `12`, want: `12`},
		{yaml: `-7`, want: `-7`},
		{yaml: `0x1f`, want: `31`},
		{yaml: `0o17`, want: `15`},
		{yaml: `1_000`, want: `1000`},
		{yaml: `123456789012345678901234567890`, want: `123456789012345678901234567890`},
		{yaml: `1.50`, want: `1.50`},
		{yaml: `1e3`, want: `1e3`},
		{yaml: `.5`, want: `0.5`},
		{yaml: `-.5e1`, want: `-5`},
		{yaml: `"12"`, want: `"12"`},
		{yaml: `2024-01-02`, want: `"2024-01-02"`},
		{yaml: `plain text`, want: `"plain text"`},
		{yaml: `"a\tb \u00e9"`, want: `"a\tb é"`},
		{yaml: `{b: 1, a: [x, {c: null}]}`, want: `{"b":1,"a":["x",{"c":null}]}`},
		{yaml: `{1: one, true: t}`, want: `{"1":"one","true":"t"}`},
		{yaml: "a: &x [1, 2]\nb: *x", want: `{"a":[1,2],"b":[1,2]}`},
		{yaml: `.inf`, wantErr: `line 1: ".inf": number cannot be written as JSON`},
		{yaml: `-.Inf`, wantErr: `line 1: "-.Inf": number cannot be written as JSON`},
		{yaml: `.nan`, wantErr: `line 1: ".nan": number cannot be written as JSON`},
		{yaml: `{a: 1, a: 2}`, wantErr: `line 1: duplicate mapping key "a"`},
		{yaml: `{[a]: 1}`, wantErr: `line 1: a mapping key must be a scalar (merge keys are not supported)`},
		{yaml: "base: &b {x: 1}\nm: {<<: *b}", wantErr: `line 2: a mapping key must be a scalar (merge keys are not supported)`},
		{yaml: "a: &a [*a]", wantErr: `value nests deeper than 100 levels (or holds a recursive alias)`},
	}
	for _, tt := range tests {
		t.Run(tt.yaml, func(t *testing.T) {
			t.Parallel()
			var n yaml.Node
			if err := yaml.Unmarshal([]byte(tt.yaml), &n); err != nil {
				if tt.wantErr != "" && strings.Contains(err.Error(), "already defined") {
					return // yaml.v3 itself refuses some duplicates
				}
				t.Fatal(err)
			}
			got, err := yamlToJSON(&n, 0)
			var gotErr string
			if err != nil {
				gotErr = err.Error()
			}
			if string(got) != tt.want || gotErr != tt.wantErr {
				t.Errorf("yamlToJSON(%s) = %s, %q; want %s, %q", tt.yaml, got, gotErr, tt.want, tt.wantErr)
			}
		})
	}
}
