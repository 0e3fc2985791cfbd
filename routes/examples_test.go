package routes

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgateway/idemgateway/canonical"
)

// TestExampleRoutesRules loads examples/routes-rules.yaml, the example of the canonicalization
// rules, and checks its routes against the real-API payloads of examples/payloads: the first
// request of each case gets the document of <case>.document.json (which canonical's TestPayloads
// also checks, with the same rules written as canonical.Fields), its genuine retry the same
// fingerprint, and its changed request another.
func TestExampleRoutesRules(t *testing.T) {
	t.Parallel()
	cfg, err := Load("../examples/routes-rules.yaml")
	if err != nil {
		t.Fatalf("examples/routes-rules.yaml does not load:\n%v", err)
	}
	byName := make(map[string]*Route)
	for _, r := range cfg.Routes {
		byName[r.Name] = r
	}
	docs, err := filepath.Glob("../examples/payloads/*.document.json")
	if err != nil || len(docs) < 6 {
		t.Fatalf("payload cases: %v, %v", docs, err)
	}
	for _, file := range docs {
		name := strings.TrimSuffix(filepath.Base(file), ".document.json")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			want = []byte(strings.TrimSpace(string(want)))
			var head struct {
				Tool   string            `json:"tool"`
				Method string            `json:"method"`
				Path   map[string]string `json:"path"`
			}
			if err := json.Unmarshal(want, &head); err != nil {
				t.Fatal(err)
			}
			rt := byName[head.Tool]
			if rt == nil || rt.Method != head.Method {
				t.Fatalf("no %s route %q in examples/routes-rules.yaml", head.Method, head.Tool)
			}
			ext, ct := ".json", "application/json"
			if _, err := os.Stat(filepath.Join("../examples/payloads", name+".form")); err == nil {
				ext, ct = ".form", "application/x-www-form-urlencoded"
			}
			doc := func(suffix string) []byte {
				t.Helper()
				body, err := os.ReadFile(filepath.Join("../examples/payloads", name+suffix+ext))
				if err != nil {
					t.Fatal(err)
				}
				d, err := rt.Fingerprint.Document(&canonical.Request{
					Tool: rt.Name, Method: rt.Method, PathParams: head.Path,
					Header: http.Header{"Content-Type": {ct}}, Body: body,
				})
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			first := doc("")
			if string(first) != string(want) {
				t.Errorf("document\n got %s\nwant %s", first, want)
			}
			if retry := doc(".retry"); canonical.Fingerprint(retry) != canonical.Fingerprint(first) {
				t.Errorf("the retry conflicts at %v", rt.Fingerprint.DifferingFields(first, retry, 0))
			}
			if changed := doc(".changed"); canonical.Fingerprint(changed) == canonical.Fingerprint(first) {
				t.Errorf("the changed request replays")
			}
		})
	}
	t.Run("C07", func(t *testing.T) {
		t.Parallel()
		rt := byName["create_ticket"]
		fp := func(body string) string {
			d, err := rt.Fingerprint.Document(&canonical.Request{Tool: rt.Name, Method: rt.Method,
				Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body)})
			if err != nil {
				t.Fatal(err)
			}
			return canonical.Fingerprint(d)
		}
		if fp(`{"name":"w1"}`) != fp(`{"name":"w1","metadata":{}}`) {
			t.Error(`{"name":"w1"} and {"name":"w1","metadata":{}} differ under /metadata: {}`)
		}
		if fp(`{"name":"w1"}`) == fp(`{"name":"w1","metadata":{"a":1}}`) {
			t.Error(`a metadata member does not count`)
		}
	})
}
