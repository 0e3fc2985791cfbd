package routes

import (
	"strings"
	"testing"

	"github.com/idemgateway/idemgateway/canonical"
)

func TestKeyTemplate(t *testing.T) {
	t.Parallel()
	values := map[string]string{
		"tenant:":           "acme",
		"body:/incident_id": "INC-7",
		"path:project":      "ops",
		"query:run":         "17",
		"header:X-Job-Id":   "job-1",
		"body:/long":        strings.Repeat("x", 300),
		"body:/unicode":     "café",
		"body:/empty":       "",
		"body:/spaces":      "   ",
		"body:/longest":     strings.Repeat("x", 255),
	}
	lookup := func(source, name string, _ canonical.Pointer) (string, bool) {
		v, ok := values[source+":"+name]
		return v, ok
	}
	tests := []struct {
		template string
		key      string
		err      string
	}{
		{template: "{tenant}:{body:/incident_id}:create_ticket", key: "acme:INC-7:create_ticket"},
		{template: "{path:project}/{query:run}/{header:X-Job-Id}", key: "ops/17/job-1"},
		{template: "{body:/long}", key: "sha256:"},
		{template: "x-{body:/unicode}", key: "sha256:"},
		{template: "{body:/spaces}", key: "sha256:"}, // not a valid key (record.CheckKey): no key of spaces only
		{template: "{body:/longest}", key: strings.Repeat("x", 255)},
		{template: "{body:/missing}", err: "field {body:/missing} is missing"},
		{template: "{body:/empty}", err: "field {body:/empty} is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.template, func(t *testing.T) {
			kt, err := ParseKeyTemplate(tt.template)
			if err != nil {
				t.Fatal(err)
			}
			key, err := kt.Render(lookup)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || !strings.HasPrefix(key, tt.key) || (tt.key == "sha256:" && len(key) != 71) {
				t.Fatalf("Render = %q, %v; want %q", key, err, tt.key)
			}
		})
	}
}

func TestParseKeyTemplateErrors(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"create_ticket":  `"create_ticket": a template needs at least one {field}`,
		"{tenant":        `"{tenant": unterminated '{'`,
		"a}b{tenant}":    `"a}b{tenant}": unmatched '}'`,
		"{{tenant}}":     `"{{tenant}}": unterminated '{'`,
		"{body:title}":   `"{body:title}": field {body:title}: "title": JSON Pointer must start with "/"`,
		"{cookie:x}":     `"{cookie:x}": field {cookie:x}: unknown source "cookie" (want tenant, key, path, body, query or header)`,
		"{path}":         `"{path}": field {path}: want {tenant}, {key}, {path:NAME}, {body:/POINTER}, {query:NAME} or {header:NAME}`,
		"{tenant}:{key}": `"{tenant}:{key}": {key} is what this template makes`,
	}
	for template, want := range tests {
		if _, err := ParseKeyTemplate(template); err == nil || err.Error() != want {
			t.Errorf("ParseKeyTemplate(%q) = %v, want %q", template, err, want)
		}
	}
	for _, bad := range []string{"tenant", "path:id", "cookie:x", "body:x"} {
		if _, err := ParseKeySource(bad); err == nil {
			t.Errorf("ParseKeySource(%q) succeeded", bad)
		}
	}
	ks, err := ParseKeySource("body:/params/_meta/idempotency_key")
	if err != nil || ks.Source != SourceBody || ks.Pointer.String() != "/params/_meta/idempotency_key" || ks.String() != "body:/params/_meta/idempotency_key" {
		t.Errorf("ParseKeySource = %+v, %v", ks, err)
	}
}
