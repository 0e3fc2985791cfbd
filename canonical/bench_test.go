package canonical

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/idemgateway/idemgateway/internal/fixtures"
)

// BenchmarkDocument measures Document and Fingerprint (canonicalize+hash) on 1 KiB and 64 KiB JSON bodies (with one Exclude pointer
// and one listed header) beside encoding/json's Unmarshal of the same body into any, so one run
// gives the ratio of the two; then the same for GraphQL requests under the graphql format (the
// query parsed and printed), for the JSON body under rules of every kind, and for an MCP
// tools/call whose arguments are the JSON body, under the jsonrpc format (a guarded call's).
func BenchmarkDocument(b *testing.B) {
	c, err := Compile(Fields{Exclude: []Pointer{mustPointer(b, "/trace_id")}, Headers: []string{"X-Account"}})
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{1 << 10, 64 << 10} {
		body := benchBody(size)
		r := &Request{
			Tool:   "create_ticket",
			Method: http.MethodPost,
			Header: http.Header{"Content-Type": {"application/json"}, "X-Account": {"acme"}},
			Body:   body,
		}
		name := fmt.Sprintf("%dKiB", size>>10)
		b.Run(name+"/Document", func(b *testing.B) {
			benchDocument(b, c, r)
		})
		b.Run(name+"/encoding-json-Unmarshal", func(b *testing.B) {
			benchUnmarshal(b, body)
		})
		rules, err := Compile(Fields{
			Exclude:   []Pointer{mustPointer(b, "/trace_id")},
			Headers:   []string{"X-Account"},
			Sets:      []Pointer{mustPointer(b, "/labels")},
			Defaults:  []Default{{mustPointer(b, "/metadata"), []byte(`{}`)}},
			Normalize: []Normalization{{mustPointer(b, "/title"), []string{"trim", "collapse_space", "nfc", "casefold", "nfc"}}},
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/Document-rules", func(b *testing.B) {
			benchDocument(b, rules, r)
		})

		gql := benchGraphQLBody(size)
		gr := &Request{Tool: "linear_issue_create", Method: http.MethodPost, Header: http.Header{"Content-Type": {"application/json"}}, Body: gql}
		gc, err := Compile(Fields{Format: FormatGraphQL, Sets: []Pointer{mustPointer(b, "/variables/input/labelIds")}})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/graphql/Document", func(b *testing.B) {
			benchDocument(b, gc, gr)
		})
		b.Run(name+"/graphql/encoding-json-Unmarshal", func(b *testing.B) {
			benchUnmarshal(b, gql)
		})

		call := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"create_ticket","arguments":` + string(body) +
			`,"_meta":{"progressToken":"p-42","io.github.idemgateway/idempotencyKey":"k-1"}}}`)
		rc, err := Compile(Fields{Format: FormatJSONRPC})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/jsonrpc/Document", func(b *testing.B) {
			benchDocument(b, rc, &Request{Tool: "tickets/create_ticket", Method: http.MethodPost, Body: call})
		})
	}
}

// BenchmarkDocumentTickets measures Document and Fingerprint on the help desk's ticket lists of
// 16 KiB and 256 KiB (internal/fixtures: strings of every length, escapes and numbers as a real
// API's JSON has them) beside encoding/json's Unmarshal of the same list.
func BenchmarkDocumentTickets(b *testing.B) {
	c, err := Compile(Fields{})
	if err != nil {
		b.Fatal(err)
	}
	for _, list := range []struct {
		name string
		body []byte
	}{{"16KiB", fixtures.Tickets16K}, {"256KiB", fixtures.Tickets256K}} {
		r := &Request{Tool: "list_tickets", Method: http.MethodPost, Header: http.Header{"Content-Type": {"application/json"}}, Body: list.body}
		b.Run(list.name+"/Document", func(b *testing.B) {
			benchDocument(b, c, r)
		})
		b.Run(list.name+"/encoding-json-Unmarshal", func(b *testing.B) {
			benchUnmarshal(b, list.body)
		})
	}
}

// BenchmarkLookupPrefixes measures what the gateway does when an upstream commits: read the
// receipt fields /id and /url from a 1 KiB and a 64 KiB response, with the baseline of two Lookup
// calls (two whole parses) and then with LookupPrefixes (one pass that stops after /url), which
// reports how many times faster it ran than the baseline just before it (x-faster-than-2-Lookup;
// left out when -bench selects LookupPrefixes alone). LookupPrefixes-absent is the worst case, a
// response without the fields, which LookupPrefixes reads to its end.
func BenchmarkLookupPrefixes(b *testing.B) {
	id, url := mustPointer(b, "/id"), mustPointer(b, "/url")
	absent := []Pointer{mustPointer(b, "/absent"), mustPointer(b, "/ticket/absent")}
	for _, size := range []int{1 << 10, 64 << 10} {
		body := benchResponse(size)
		if v := LookupPrefixes(body, id, url); v[0] != "TCK-10293" || v[1] != "https://tickets.example/TCK-10293" {
			b.Fatalf("LookupPrefixes = %q", v)
		}
		name := fmt.Sprintf("%dKiB", size>>10)
		var baseline float64 // ns/op of the two Lookup calls, once measured
		b.Run(name+"/2-Lookup", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if v, _ := Lookup(body, id); v == "" {
					b.Fatal("no id")
				}
				if v, _ := Lookup(body, url); v == "" {
					b.Fatal("no url")
				}
			}
			baseline = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
		b.Run(name+"/LookupPrefixes", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if v := LookupPrefixes(body, id, url); v[1] == "" {
					b.Fatal("no url")
				}
			}
			reportSpeedup(b, baseline)
		})
		b.Run(name+"/LookupPrefixes-absent", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if v := LookupPrefixes(body, absent...); v[1] != "" {
					b.Fatal("found an absent member")
				}
			}
			reportSpeedup(b, baseline)
		})
	}
}

// reportSpeedup reports how many times faster than baseline ns/op b ran, if baseline is known.
func reportSpeedup(b *testing.B, baseline float64) {
	if baseline > 0 {
		b.ReportMetric(baseline/(float64(b.Elapsed().Nanoseconds())/float64(b.N)), "x-faster-than-2-Lookup")
	}
}

// benchDocument measures what the gateway does per request: canonicalize, then hash.
func benchDocument(b *testing.B, c *Canonicalizer, r *Request) {
	b.SetBytes(int64(len(r.Body)))
	b.ReportAllocs()
	for b.Loop() {
		doc, err := c.Document(r)
		if err != nil {
			b.Fatal(err)
		}
		_ = Fingerprint(doc)
	}
}

func benchUnmarshal(b *testing.B, body []byte) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			b.Fatal(err)
		}
	}
}
