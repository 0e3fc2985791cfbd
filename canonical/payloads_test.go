package canonical

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// payloadsDir holds request bodies shaped like the public documentation of real APIs: for each
// case <name>, the first request (<name>.json or <name>.form), a genuine retry of it
// (<name>.retry.*), the same request with one field of its effect changed (<name>.changed.*), and
// the canonical document of the first request (<name>.document.json), whose tool, method and
// path parameters are those of the route in examples/routes-rules.yaml. routes/examples_test.go
// checks the same files against that routes file, so the inline rules here and the YAML there
// must say the same.
const payloadsDir = "../examples/payloads"

// payloadCases are the route rules of examples/routes-rules.yaml, written as Fields, with the
// fields that the changed request changes.
var payloadCases = []struct {
	name   string
	fields func(tb testing.TB) Fields
	differ []string // c.DifferingFields(first, changed)
}{
	{
		name: "jira-create-issue",
		fields: func(tb testing.TB) Fields {
			return Fields{
				Include: pointers(tb, "/fields/project/key", "/fields/summary", "/fields/issuetype/name", "/fields/priority/name",
					"/fields/labels", "/fields/description"),
				Sets:      pointers(tb, "/fields/labels"),
				Defaults:  []Default{{mustPointer(tb, "/fields/labels"), []byte(`[]`)}},
				Normalize: []Normalization{{mustPointer(tb, "/fields/summary"), []string{"trim", "collapse_space"}}},
			}
		},
		differ: []string{"/fields/summary"},
	},
	{
		name: "zendesk-create-ticket",
		fields: func(tb testing.TB) Fields {
			return Fields{
				Include: pointers(tb, "/ticket/subject", "/ticket/comment/body", "/ticket/priority", "/ticket/type",
					"/ticket/requester/email", "/ticket/tags", "/ticket/custom_fields"),
				Sets:      pointers(tb, "/ticket/tags"),
				Defaults:  []Default{{mustPointer(tb, "/ticket/tags"), []byte(`[]`)}},
				Normalize: []Normalization{{mustPointer(tb, "/ticket/requester/email"), []string{"trim", "casefold"}}},
			}
		},
		differ: []string{"/ticket/comment/body"},
	},
	{
		name: "linear-issue-create",
		fields: func(tb testing.TB) Fields {
			return Fields{
				Format:    FormatGraphQL,
				Sets:      pointers(tb, "/variables/input/labelIds"),
				Normalize: []Normalization{{mustPointer(tb, "/variables/input/title"), []string{"trim"}}},
			}
		},
		differ: []string{"/variables/input/priority"},
	},
	{
		name: "stripe-create-refund",
		fields: func(tb testing.TB) Fields {
			return Fields{Format: FormatForm, Include: pointers(tb, "/charge", "/payment_intent", "/amount", "/reason")}
		},
		differ: []string{"/amount"},
	},
	{
		name: "github-create-issue",
		fields: func(tb testing.TB) Fields {
			return Fields{
				Sets:      pointers(tb, "/labels", "/assignees"),
				Defaults:  []Default{{mustPointer(tb, "/labels"), []byte(`[]`)}, {mustPointer(tb, "/assignees"), []byte(`[]`)}},
				Normalize: []Normalization{{mustPointer(tb, "/title"), []string{"trim", "collapse_space"}}},
			}
		},
		differ: []string{"/body"},
	},
	{
		name: "mcp-tools-call",
		fields: func(tb testing.TB) Fields {
			return Fields{
				Format:    FormatJSONRPC,
				Normalize: []Normalization{{mustPointer(tb, "/params/arguments/title"), []string{"trim", "collapse_space"}}},
			}
		},
		differ: []string{"/params/arguments/priority"},
	},
}

// payloadRequests returns the first, retried and changed requests of a payload case, with the
// tool, method and path parameters of its expected document, and that document.
func payloadRequests(tb testing.TB, name string) (first, retry, changed *Request, want []byte) {
	tb.Helper()
	want, err := os.ReadFile(filepath.Join(payloadsDir, name+".document.json"))
	if err != nil {
		tb.Fatal(err)
	}
	want = []byte(strings.TrimSpace(string(want)))
	var head struct {
		Tool   string            `json:"tool"`
		Method string            `json:"method"`
		Path   map[string]string `json:"path"`
	}
	if err := json.Unmarshal(want, &head); err != nil {
		tb.Fatalf("%s.document.json: %v", name, err)
	}
	ext, ct := ".json", "application/json"
	if _, err := os.Stat(filepath.Join(payloadsDir, name+".form")); err == nil {
		ext, ct = ".form", "application/x-www-form-urlencoded"
	}
	read := func(suffix string) *Request {
		body, err := os.ReadFile(filepath.Join(payloadsDir, name+suffix+ext))
		if err != nil {
			tb.Fatal(err)
		}
		return &Request{Tool: head.Tool, Method: head.Method, PathParams: head.Path, Header: http.Header{"Content-Type": {ct}}, Body: body}
	}
	return read(""), read(".retry"), read(".changed"), want
}

// TestPayloads checks, for bodies shaped like real APIs' documentation, that a genuine retry gets
// the fingerprint of the first request (a replay) and a changed field a different one (a
// conflict that names the field).
func TestPayloads(t *testing.T) {
	t.Parallel()
	for _, tc := range payloadCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := Compile(tc.fields(t))
			if err != nil {
				t.Fatal(err)
			}
			first, retry, changed, want := payloadRequests(t, tc.name)
			doc, err := c.Document(first)
			if err != nil {
				t.Fatal(err)
			}
			if string(doc) != string(want) {
				t.Errorf("document of the first request\n got %s\nwant %s", doc, want)
			}
			retried, err := c.Document(retry)
			if err != nil {
				t.Fatal(err)
			}
			if Fingerprint(retried) != Fingerprint(doc) {
				t.Errorf("the retry conflicts: %v\n%s\n%s", c.DifferingFields(doc, retried, 0), doc, retried)
			}
			other, err := c.Document(changed)
			if err != nil {
				t.Fatal(err)
			}
			if Fingerprint(other) == Fingerprint(doc) {
				t.Errorf("the changed request replays")
			}
			if got := c.DifferingFields(doc, other, 10); !slices.Equal(got, tc.differ) {
				t.Errorf("DifferingFields = %q, want %q", got, tc.differ)
			}
			for _, r := range []*Request{first, retry, changed} {
				d, _, err := c.Explain(r)
				if err != nil {
					t.Fatal(err)
				}
				if d2, _ := c.Document(r); string(d) != string(d2) {
					t.Errorf("Explain's document differs from Document's")
				}
			}
		})
	}
}

// TestPayloadsWithoutRules checks that the rules are what makes each retry replay: without them
// (whole body, read by its Content-Type) every retry conflicts.
func TestPayloadsWithoutRules(t *testing.T) {
	t.Parallel()
	for _, tc := range payloadCases {
		first, retry, _, _ := payloadRequests(t, tc.name)
		a, errA := (*Canonicalizer)(nil).Document(first)
		b, errB := (*Canonicalizer)(nil).Document(retry)
		if errA != nil || errB != nil {
			t.Fatalf("%s: %v, %v", tc.name, errA, errB)
		}
		if Fingerprint(a) == Fingerprint(b) {
			t.Errorf("%s: the retry replays without the rules; it shows nothing", tc.name)
		}
	}
}
