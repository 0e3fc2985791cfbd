package record

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"
)

// Record is the payload the gateway keeps in the store for one key: the receipt (without its
// state, which the store owns), the owner token of the current execution, and the stored response.
// It is kept in the framed binary form of Encode (docs/record-format.md), not JSON: a replay
// decodes it on every request.
type Record struct {
	Receipt
	Owner     string
	StartedAt time.Time
	Response  *Response
	// Document is the canonical document of the request that claimed the key, kept so that a
	// conflict can name the fields that differ; nil when larger than MaxDocumentBytes.
	Document []byte
	// Caller names who claimed the key, when the gateway authenticates its callers
	// (docs/security.md#who-is-calling): only that caller's conflicts tell of the record. "" without
	// clients, and in records written before it was kept.
	Caller string
	// Rules is the fingerprint rules the request that claimed the key was fingerprinted under
	// (canonical.Canonicalizer.Rules), kept so that a retry that meets the record after the rules
	// changed is compared under them (docs/fingerprint.md#when-the-rules-change). The claim part
	// holds it, as it holds the document; nil in records written before it was kept.
	Rules []byte
}

// MaxDocumentBytes bounds the canonical document a record keeps (64 KiB). A request whose
// document is larger still gets its fingerprint checked; its conflicts carry no differing_fields.
const MaxDocumentBytes = 64 << 10

// Response is what a replay sends: the upstream's status, filtered headers and body.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	// IDSpan is where the top-level id of Body lies (Body[IDSpan[0]:IDSpan[1]]) when Body is a
	// JSON-RPC response kept for a route of fingerprint format jsonrpc: found once, as it is
	// stored, so that a replay splices the retry's id there without reading Body again
	// (mcpwire.SpliceID). Zero when not found, and in records written before it was kept.
	IDSpan [2]int
}

// recordMagic starts every encoded record: "idr" and the format version. A version this gateway
// does not know is refused as ErrCorrupt, so a newer format is never misread; the magic also
// differs from the encryption wrapper's, so a record in the clear is never taken for a sealed one.
//
// Version 2 has the layout of version 1, which is still read; it marks a record stored in two
// parts (Payload: the claim's, and the settle's without the document, see EncodeSettle), so
// that a gateway of version 1, which reads the claim part alone, refuses a settled record as
// corrupt rather than replay it without its response.
var recordMagic = [4]byte{'i', 'd', 'r', 2}

// recordVersion1 is the version of records written before the payload was split.
const recordVersion1 = 1

// recordHead is the bytes before the small fields: the magic and their length.
const recordHead = len(recordMagic) + 4

// encode returns the record in its stored form, built in one allocation:
//
//	magic (4 bytes) | n (uint32, little-endian) | the small fields (n bytes) | document | body
//
// The small fields are written by fields, in its order. Integers, lengths and counts are varints
// (encoding/binary's zigzag form); a string is its length and its bytes; a bool is the integer 0
// or 1; a time is a bool (set) and, when set, its Unix seconds and nanoseconds; headers are a count
// of names, then each name and its values (a count, then each value). The last two small fields
// are the lengths of the document and of the response body, whose bytes follow, so that a decoder
// copies the small fields once and leaves the large ones in place. After them come the optional
// small fields, each written only when set, so that a record without them is the same bytes as
// before they existed: the caller (a string), the MCP protocol version (a string) and the span
// of the response body's JSON-RPC id (two integers, both 0 when there is none), and the
// fingerprint rules (a string).
func (rec *Record) Encode() []byte {
	var body []byte
	if rec.Response != nil {
		body = rec.Response.Body
	}
	e := recordEncoder{sizing: true}
	rec.fields(&e, len(body))
	e.buf = make([]byte, recordHead, recordHead+e.n+len(rec.Document)+len(body))
	copy(e.buf, recordMagic[:])
	e.sizing = false
	rec.fields(&e, len(body))
	binary.LittleEndian.PutUint32(e.buf[len(recordMagic):], uint32(len(e.buf)-recordHead))
	e.buf = append(e.buf, rec.Document...)
	return append(e.buf, body...)
}

// EncodeSettle returns the record's settle part (Payload.Settle), which Commit and
// MarkUnknown store: its stored form without the document, which the claim part holds already, so
// that a settle does not send it to the store again (Decode puts it back).
func (rec *Record) EncodeSettle() []byte {
	r := *rec
	r.Document, r.Rules = nil, nil
	return r.Encode()
}

// Decode decodes the record the store keeps in stored, with state as the store reports it:
// the claim part alone while nothing settled the record (or when a gateway before the split stored
// the whole record there), else the settle part with the document and rules of the claim part.
func Decode(state string, stored Payload) (*Record, error) {
	rec, err := DecodeSettled(state, stored)
	if err != nil || len(stored.Settle) == 0 {
		return rec, err
	}
	if len(stored.Claim) == 0 {
		return nil, fmt.Errorf("%w: a settled record without its claim part", ErrCorrupt)
	}
	if err := rec.ReadClaim(stored.Claim); err != nil {
		return nil, err
	}
	return rec, nil
}

// DecodeSettled is Decode without the claim part of a settled record: the settle part holds all a
// replay serves and the fingerprint it is checked by, and it is all a Claim answers of such a
// record (Store.Claim), so a replay reads and decodes only that
// (docs/performance.md#records-buffers-and-allocations). A settled record's Document and Rules are
// nil until ReadClaim.
func DecodeSettled(state string, stored Payload) (*Record, error) {
	if len(stored.Settle) == 0 {
		return decodePart(state, stored.Claim)
	}
	return decodePart(state, stored.Settle)
}

// ReadClaim sets rec's Document and Rules, which its settle part leaves out, from claim, the claim
// part of the same record (Payload.Claim, as Get reads it).
func (rec *Record) ReadClaim(claim []byte) error {
	part, err := decodePart(rec.State, claim)
	if err != nil {
		return err
	}
	rec.Document, rec.Rules = part.Document, part.Rules
	return nil
}

// fields walks the record's small fields in their stored order for e; bodyLen is the length of
// the response body. decodePart reads them in the same order.
func (rec *Record) fields(e *recordEncoder, bodyLen int) {
	r := &rec.Receipt
	for _, s := range [...]string{r.IdempotencyKey, r.Tenant, r.Tool, r.CredentialScope, r.EffectFingerprint,
		r.Actor, r.RemoteSystem, r.RemoteID, r.RemoteURL, r.Detail, rec.Owner} {
		e.string(s)
	}
	e.int(int64(r.ResponseStatus))
	e.int(int64(r.Executions))
	e.bool(r.ResponseBodyKept)
	var committed time.Time
	if r.CommittedAt != nil {
		committed = *r.CommittedAt
	}
	e.time(committed)
	e.time(r.ExpiresAt)
	e.time(rec.StartedAt)
	e.bool(rec.Response != nil)
	if resp := rec.Response; resp != nil {
		e.int(int64(resp.Status))
		e.int(int64(len(resp.Header)))
		for name, values := range resp.Header {
			e.string(name)
			e.int(int64(len(values)))
			for _, v := range values {
				e.string(v)
			}
		}
	}
	e.int(int64(len(rec.Document)))
	e.int(int64(bodyLen))
	// The optional fields, in order: those up to the last one set are written (a caller of "" when
	// there is none), so that a record without them keeps its earlier form.
	var idSpan [2]int
	if rec.Response != nil {
		idSpan = rec.Response.IDSpan
	}
	optional := 0
	switch {
	case rec.Rules != nil:
		optional = 4
	case idSpan != [2]int{}:
		optional = 3
	case r.MCPProtocolVersion != "":
		optional = 2
	case rec.Caller != "":
		optional = 1
	}
	if optional >= 1 {
		e.string(rec.Caller)
	}
	if optional >= 2 {
		e.string(r.MCPProtocolVersion)
	}
	if optional >= 3 {
		e.int(int64(idSpan[0]))
		e.int(int64(idSpan[1]))
	}
	if optional >= 4 {
		e.string(string(rec.Rules))
	}
}

// recordEncoder appends a record's small fields to buf, or, while sizing, only counts an upper
// bound of their bytes in n.
type recordEncoder struct {
	buf    []byte
	n      int
	sizing bool
}

func (e *recordEncoder) int(v int64) {
	if e.sizing {
		e.n += binary.MaxVarintLen64
		return
	}
	e.buf = binary.AppendVarint(e.buf, v)
}

func (e *recordEncoder) string(s string) {
	e.int(int64(len(s)))
	if e.sizing {
		e.n += len(s)
		return
	}
	e.buf = append(e.buf, s...)
}

func (e *recordEncoder) bool(v bool) {
	if v {
		e.int(1)
	} else {
		e.int(0)
	}
}

func (e *recordEncoder) time(t time.Time) {
	e.bool(!t.IsZero())
	if !t.IsZero() {
		e.int(t.Unix())
		e.int(int64(t.Nanosecond()))
	}
}

// decodePart decodes a stored record, with state as the store reports it: the framed form of
// encode or, from gateways before it, the JSON form of jsonRecord. A framed record's strings share
// one copy of its small fields, and its Document and response body are slices of payload itself,
// which the caller must not change afterwards. A payload that is cut off, has bytes after its last
// field, holds an impossible value or starts with another magic is an error wrapping
// ErrCorrupt that names the field.
func decodePart(state string, payload []byte) (*Record, error) {
	if len(payload) > 0 && payload[0] == '{' {
		return decodeJSONRecord(state, payload)
	}
	if len(payload) < len(recordMagic) || [3]byte(payload[:3]) != [3]byte(recordMagic[:3]) {
		return nil, fmt.Errorf("%w: not a record (no %q magic)", ErrCorrupt, recordMagic[:3])
	}
	if v := payload[3]; v != recordMagic[3] && v != recordVersion1 {
		return nil, fmt.Errorf("%w: record format version %d; this gateway reads versions %d and %d", ErrCorrupt, v, recordVersion1, recordMagic[3])
	}
	if len(payload) < recordHead {
		return nil, fmt.Errorf("%w: record cut off in its header", ErrCorrupt)
	}
	n := binary.LittleEndian.Uint32(payload[len(recordMagic):])
	if uint64(n) > uint64(len(payload)-recordHead) {
		return nil, fmt.Errorf("%w: %d bytes of fields, with %d bytes left", ErrCorrupt, n, len(payload)-recordHead)
	}
	small := payload[recordHead : recordHead+int(n)]
	d := recordDecoder{raw: small, str: string(small)}
	rec := &Record{Receipt: Receipt{State: state}}
	r := &rec.Receipt
	for _, f := range [...]struct {
		name string
		to   *string
	}{{"idempotency_key", &r.IdempotencyKey}, {"tenant", &r.Tenant}, {"tool", &r.Tool}, {"credential_scope", &r.CredentialScope},
		{"effect_fingerprint", &r.EffectFingerprint}, {"actor", &r.Actor}, {"remote_system", &r.RemoteSystem},
		{"remote_id", &r.RemoteID}, {"remote_url", &r.RemoteURL}, {"detail", &r.Detail}, {"owner", &rec.Owner}} {
		*f.to = d.string(f.name)
	}
	r.ResponseStatus = d.intIn("response_status", 0, 999)
	r.Executions = d.intIn("executions", 0, math.MaxInt32)
	r.ResponseBodyKept = d.bool("response_body_kept")
	if t := d.time("committed_at"); !t.IsZero() {
		r.CommittedAt = &t
	}
	r.ExpiresAt = d.time("expires_at")
	rec.StartedAt = d.time("started_at")
	if d.bool("response") {
		resp := &Response{Status: d.intIn("response status", 100, 999)}
		// Each header takes at least two bytes (its name's length and its values' count).
		if headers := d.count("response header count", 2); headers > 0 {
			resp.Header = make(http.Header, min(headers, 32))
			for range headers {
				name := d.string("response header name")
				values := make([]string, d.count("response header values", 1))
				for i := range values {
					values[i] = d.string("response header value")
				}
				resp.Header[name] = values
			}
		}
		rec.Response = resp
	}
	large := payload[recordHead+int(n):]
	docLen := d.intIn("document length", 0, len(large))
	bodyLen := d.intIn("response body length", 0, len(large)-docLen)
	if d.err == nil && d.off < len(small) { // the optional small fields (fields)
		rec.Caller = d.string("caller")
	}
	if d.err == nil && d.off < len(small) {
		r.MCPProtocolVersion = d.string("mcp_protocol_version")
	}
	var idSpan [2]int
	if d.err == nil && d.off < len(small) {
		if idSpan[0] = d.intIn("response id start", 0, bodyLen); idSpan[0] == 0 { // none
			d.intIn("response id end", 0, 0)
		} else {
			idSpan[1] = d.intIn("response id end", idSpan[0]+1, bodyLen)
		}
	}
	if d.err == nil && d.off < len(small) {
		rec.Rules = []byte(d.string("rules"))
	}
	if d.err == nil && d.off != len(small) {
		d.err = fmt.Errorf("%d bytes after the last field", len(small)-d.off)
	}
	if d.err == nil && docLen+bodyLen != len(large) {
		d.err = fmt.Errorf("%d bytes after the response body", len(large)-docLen-bodyLen)
	}
	if d.err == nil && bodyLen > 0 && rec.Response == nil {
		d.err = errors.New("a response body without a response")
	}
	if d.err == nil && idSpan != [2]int{} && rec.Response == nil {
		d.err = errors.New("a response id without a response")
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, d.err)
	}
	if docLen > 0 {
		rec.Document = large[:docLen:docLen]
	}
	if bodyLen > 0 {
		rec.Response.Body = large[docLen:]
	}
	if rec.Response != nil {
		rec.Response.IDSpan = idSpan
	}
	return rec, nil
}

// recordDecoder reads the small fields of an encoded record in order; after the first error
// every read returns a zero value and err keeps that error. str holds the same bytes as raw, so
// that the record's strings share one copy.
type recordDecoder struct {
	raw []byte
	str string
	off int
	err error
}

// fail records the first error: the field, the offset where it starts, and why.
func (d *recordDecoder) fail(field string, at int, why string) {
	if d.err == nil {
		d.err = fmt.Errorf("%s at byte %d: %s", field, at, why)
	}
}

func (d *recordDecoder) int(field string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.raw[d.off:])
	if n <= 0 {
		d.fail(field, d.off, "cut off or overlong integer")
		return 0
	}
	d.off += n
	return v
}

// intIn reads an integer that must lie in [lo, hi].
func (d *recordDecoder) intIn(field string, lo, hi int) int {
	at := d.off
	v := d.int(field)
	if d.err == nil && (v < int64(lo) || v > int64(hi)) {
		d.fail(field, at, fmt.Sprintf("%d is out of range [%d, %d]", v, lo, hi))
		return lo
	}
	return int(v)
}

// count reads a number of items to come, each at least size bytes long, or a length in bytes
// (size 1): the bytes left after it bound it, so that a damaged count allocates nothing large.
func (d *recordDecoder) count(field string, size int) int {
	at := d.off
	n := d.int(field)
	if d.err == nil && (n < 0 || n > int64((len(d.raw)-d.off)/size)) {
		d.fail(field, at, fmt.Sprintf("%d, with %d bytes left", n, len(d.raw)-d.off))
		return 0
	}
	return int(n)
}

// string reads a length-prefixed string, a substring of str.
func (d *recordDecoder) string(field string) string {
	n := d.count(field, 1)
	start := d.off
	d.off += n
	return d.str[start:d.off]
}

func (d *recordDecoder) bool(field string) bool {
	return d.intIn(field, 0, 1) == 1
}

// time reads a time written by recordEncoder.time: the zero time when not set.
func (d *recordDecoder) time(field string) time.Time {
	if !d.bool(field) {
		return time.Time{}
	}
	sec := d.int(field)
	nsec := d.intIn(field, 0, 999_999_999)
	return time.Unix(sec, int64(nsec)).UTC()
}

// jsonRecord is the JSON form in which gateways before the framed form (commit 8e113c4) stored
// records; decodePart still reads it, so that those records replay after an upgrade. Nothing
// writes it.
type jsonRecord struct {
	Receipt
	Owner     string    `json:"owner"`
	StartedAt time.Time `json:"started_at"`
	Response  *struct {
		Status int         `json:"status"`
		Header http.Header `json:"header"`
		Body   []byte      `json:"body"` // base64
	} `json:"response"`
	Document json.RawMessage `json:"document"`
}

// decodeJSONRecord decodes a record in the form of jsonRecord.
func decodeJSONRecord(state string, payload []byte) (*Record, error) {
	var j jsonRecord
	if err := json.Unmarshal(payload, &j); err != nil {
		return nil, fmt.Errorf("%w: a JSON record that does not decode: %v", ErrCorrupt, err)
	}
	rec := &Record{Receipt: j.Receipt, Owner: j.Owner, StartedAt: j.StartedAt, Document: j.Document}
	if j.Response != nil {
		rec.Response = &Response{Status: j.Response.Status, Header: j.Response.Header, Body: j.Response.Body}
	}
	// Read back in the framed form, so that both forms pass the same checks (a response status
	// out of range, say).
	return decodePart(state, rec.Encode())
}
