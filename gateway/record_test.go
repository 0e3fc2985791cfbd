package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fullRecord is a committed record with every field set, odd bytes included.
func fullRecord() *record {
	committed := time.Date(2026, 11, 30, 5, 30, 0, 123456789, time.UTC)
	return &record{
		Receipt: Receipt{
			IdempotencyKey: "k\x00\"é", Tenant: "acme", Tool: "create_ticket", CredentialScope: "c0ffee",
			EffectFingerprint: "sha256:" + strings.Repeat("ab", 32), State: StateCommitted, Actor: "agent-7",
			RemoteSystem: "jira", RemoteID: "T-1", RemoteURL: "https://t/1", ResponseStatus: 201,
			CommittedAt: &committed, ExpiresAt: committed.Add(24 * time.Hour), Executions: 2,
			ResponseBodyKept: true, Detail: "upstream answered 502",
		},
		Owner:     "0123456789abcdef0123456789abcdef",
		StartedAt: committed.Add(-time.Second),
		Response: &storedResponse{
			Status: 201,
			Header: http.Header{"Content-Type": {"application/json"}, "Link": {"<a>", "<b>"}, "X-Empty": {""}},
			Body:   []byte("{\"id\":\"T-1\"}\x00\xff"),
		},
		Document: []byte(`{"body":{"title":"a"}}`),
	}
}

// TestRecordRoundTrip: decode gives back what encode was given, for a full record, a fresh claim
// (no response, no commit time) and a committed record whose body was not kept.
func TestRecordRoundTrip(t *testing.T) {
	claim := &record{Receipt: Receipt{IdempotencyKey: "k", Tenant: "default", Tool: "t", EffectFingerprint: "sha256:00",
		State: StateInProgress, ExpiresAt: time.Unix(1700000000, 0).UTC(), Executions: 1}, Owner: "o", StartedAt: time.Unix(1699990000, 5).UTC()}
	bodiless := fullRecord()
	bodiless.Response.Body, bodiless.ResponseBodyKept, bodiless.Response.Header = nil, false, nil
	for name, rec := range map[string]*record{"full": fullRecord(), "claim": claim, "bodiless": bodiless} {
		got, err := decodeRecord(rec.State, rec.encode())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, rec) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", name, got, rec)
		}
	}
}

// TestRecordEncodeOneAllocation: encode sizes its buffer first and allocates once.
func TestRecordEncodeOneAllocation(t *testing.T) {
	rec := fullRecord()
	if n := testing.AllocsPerRun(100, func() { rec.encode() }); n != 1 {
		t.Errorf("encode allocates %v times, want 1", n)
	}
}

// TestDecodeRecordCorrupt: every damaged payload is refused as ErrCorruptRecord naming the problem,
// never decoded into a record that could be replayed.
func TestDecodeRecordCorrupt(t *testing.T) {
	valid := fullRecord().encode()
	cases := map[string]struct {
		payload []byte
		detail  string
	}{
		"empty":          {nil, "no \"idr\" magic"},
		"JSON":           {[]byte(`{"idempotency_key":"k"}`), "no \"idr\" magic"},
		"sealed":         {[]byte("idg1...."), "no \"idr\" magic"},
		"newer version":  {append([]byte("idr\x02"), valid[4:]...), "format version 2"},
		"trailing byte":  {append(bytes.Clone(valid), 0), "1 bytes after the last field"},
		"length too big": {[]byte("idr\x01\x7e"), "idempotency_key at byte 4: 63 items or bytes, with 0 bytes left"},
		"bad status":     {recordWith(func(r *record) { r.ResponseStatus = 1000 }), "response_status"},
		"bad bool":       {patchBodyKept(valid), "response_body_kept"},
		"negative count": {recordWith(func(r *record) { r.Executions = -1 }), "executions"},
	}
	// Every cut-off prefix of a valid record.
	for i := range len(valid) {
		cases["cut at "+strconv.Itoa(i)] = struct {
			payload []byte
			detail  string
		}{valid[:i], ""}
	}
	for name, c := range cases {
		rec, err := decodeRecord(StateCommitted, c.payload)
		if !errors.Is(err, ErrCorruptRecord) || rec != nil {
			t.Errorf("%s: decodeRecord = %v, %v; want ErrCorruptRecord", name, rec, err)
			continue
		}
		if !strings.Contains(err.Error(), c.detail) {
			t.Errorf("%s: error %q does not say %q", name, err, c.detail)
		}
	}
}

// recordWith encodes fullRecord changed by change.
func recordWith(change func(*record)) []byte {
	rec := fullRecord()
	change(rec)
	return rec.encode()
}

// patchBodyKept returns payload with the response_body_kept byte set to 2 (zigzag varint 4).
func patchBodyKept(payload []byte) []byte {
	d := recordDecoder{raw: payload, str: string(payload), off: len(recordMagic)}
	for range 11 { // the strings
		d.bytes("")
	}
	d.int("") // response_status
	d.int("") // executions
	out := bytes.Clone(payload)
	out[d.off] = 4
	return out
}

// FuzzDecodeRecord: decodeRecord never panics, refuses with ErrCorruptRecord or decodes a record
// that encodes and decodes again to the same record.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(fullRecord().encode())
	f.Add((&record{}).encode())
	f.Add([]byte("idr\x01"))
	f.Fuzz(func(t *testing.T, payload []byte) {
		rec, err := decodeRecord(StateCommitted, payload)
		if err != nil {
			if !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("error %v does not wrap ErrCorruptRecord", err)
			}
			return
		}
		again, err := decodeRecord(StateCommitted, rec.encode())
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if !reflect.DeepEqual(again, rec) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", rec, again)
		}
	})
}

// BenchmarkRecordCodec: encode and decode of a committed record with a 1 KiB document and body,
// against encoding/json on the same struct (the record's stored form before the framed one) in the
// same run; reports binary ÷ JSON time as x_json.
func BenchmarkRecordCodec(b *testing.B) {
	rec := fullRecord()
	rec.Document = bytes.Repeat([]byte(`{"a":"b"}`), 114)
	rec.Response.Body = bytes.Repeat([]byte(`{"a":"b"}`), 114)
	payload := rec.encode()
	jsonPayload, _ := json.Marshal(rec)
	var jsonNs float64
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p, _ := json.Marshal(rec)
			var r record
			_ = json.Unmarshal(jsonPayload, &r)
			_ = p
		}
		jsonNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("framed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = rec.encode()
			if _, err := decodeRecord(StateCommitted, payload); err != nil {
				b.Fatal(err)
			}
		}
		if jsonNs > 0 {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/jsonNs, "x_json")
		}
	})
}
