package canonical

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// benchBody returns a deterministic JSON object of about size bytes: a ticket with a list of
// comments, the shape of a typical tool call.
func benchBody(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"title":"Printer on floor 3 is out of toner","priority":2,"customer_id":"C-10293",` +
		`"labels":["hardware","printer","floor-3"],"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","comments":[`)
	for i := 0; b.Len() < size-2; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"author":"agent-%d","score":%s,"text":"Checked the tray \u00e9 twice; still empty (%d).","resolved":%t,"parent":null}`,
			i, i%7, strconv.FormatFloat(float64(i)*1.25, 'g', -1, 64), i, i%2 == 0)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// BenchmarkDocument measures Document on 1 KiB and 64 KiB JSON bodies (with one Exclude pointer
// and one listed header) beside encoding/json's Unmarshal of the same body into any, so one run
// gives the ratio of the two.
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
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Document(r); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/encoding-json-Unmarshal", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				var v any
				if err := json.Unmarshal(body, &v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func mustPointer(tb testing.TB, s string) Pointer {
	tb.Helper()
	p, err := ParsePointer(s)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}
