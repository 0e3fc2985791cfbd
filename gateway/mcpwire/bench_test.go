package mcpwire

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// benchMember returns a stored tool result of about size bytes: a CallToolResult with text
// content and structuredContent, as Final.Member keeps it.
func benchMember(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"result":{"structuredContent":{"id":"TCK-10293","url":"https://tickets.example/TCK-10293","count":12345678901234567890},"content":[`)
	for i := 0; b.Len() < size-4; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"text","text":"Ticket TCK-10293 comment %d: checked the tray \u00e9 twice; still empty."}`, i)
	}
	b.WriteString("]}}")
	return []byte(b.String())
}

// BenchmarkEnvelope compares the replay splice with what a re-encode costs: json.Marshal of the
// message with the stored result as a json.RawMessage (which encoding/json validates and
// compacts), and a decode of the result into any and an encode (which also rounds big numbers).
func BenchmarkEnvelope(b *testing.B) {
	ids := []struct{ name, id string }{{"number", `17`}, {"bigint", `123456789012345678901234567890`}, {"string", `"req-\u00e9-0001"`}}
	for _, size := range []int{1 << 10, 64 << 10} {
		member := benchMember(size)
		result := json.RawMessage(member[len(`{"result":`) : len(member)-1])
		for _, id := range ids {
			name := fmt.Sprintf("%dKiB/%s", size>>10, id.name)
			idb := []byte(id.id)
			b.Run(name+"/AppendEnvelope", func(b *testing.B) {
				b.SetBytes(int64(len(member)))
				b.ReportAllocs()
				for b.Loop() {
					buf := make([]byte, 0, len(envelopeHead)+len(idb)+len(member))
					_ = AppendEnvelope(buf, idb, member)
				}
			})
			b.Run(name+"/Envelope", func(b *testing.B) {
				b.SetBytes(int64(len(member)))
				b.ReportAllocs()
				for b.Loop() {
					_ = Envelope(idb, member)
				}
			})
			b.Run(name+"/json.Marshal", func(b *testing.B) {
				b.SetBytes(int64(len(member)))
				b.ReportAllocs()
				for b.Loop() {
					_, err := json.Marshal(struct {
						JSONRPC string          `json:"jsonrpc"`
						ID      json.RawMessage `json:"id"`
						Result  json.RawMessage `json:"result"`
					}{"2.0", idb, result})
					if err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(name+"/json.Unmarshal+Marshal", func(b *testing.B) {
				b.SetBytes(int64(len(member)))
				b.ReportAllocs()
				for b.Loop() {
					var v any
					if err := json.Unmarshal(result, &v); err != nil {
						b.Fatal(err)
					}
					if _, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(idb), "result": v}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkParse reads a tools/call request and its final response, the two messages every
// guarded call parses.
func BenchmarkParse(b *testing.B) {
	req := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"create_ticket","arguments":{"title":"Printer on floor 3 is out of toner","priority":2,"labels":["hardware","printer"]},"_meta":{"progressToken":"p-42","io.github.idemgateway/idempotencyKey":"k-1"}}}`)
	resp := Envelope([]byte(`42`), benchMember(1<<10))
	b.Run("tools/call", func(b *testing.B) {
		b.SetBytes(int64(len(req)))
		b.ReportAllocs()
		for b.Loop() {
			m, err := Parse(req)
			if err != nil || m.Meta("io.github.idemgateway/idempotencyKey") == nil {
				b.Fatal(m, err)
			}
		}
	})
	b.Run("ReadFinal/1KiB", func(b *testing.B) {
		b.SetBytes(int64(len(resp)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ReadFinal(resp); err != nil {
				b.Fatal(err)
			}
		}
	})
}
