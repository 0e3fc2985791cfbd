package gateway

import (
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/idemgateway/idemgateway/routes"
)

// Decisions, as sent in the Idempotency-Decision header and the agent.idempotency.decision span
// attribute (contract §4, §6).
const (
	DecisionExecute        = "execute"
	DecisionReplay         = "replay"
	DecisionConflict       = "conflict"
	DecisionInProgress     = "in_progress"
	DecisionOutcomeUnknown = "outcome_unknown"
	DecisionRejected       = "rejected"
)

// Receipt is what the gateway tells of one idempotency record (contract §5), as served by the
// admin API. Times are UTC, RFC 3339.
type Receipt struct {
	IdempotencyKey string `json:"idempotency_key"`
	Tenant         string `json:"tenant"`
	Tool           string `json:"tool"`
	// CredentialScope is the hash of the caller's credential on routes with scope.credential;
	// the admin API addresses such a record with ?credential=<this>.
	CredentialScope   string     `json:"credential_scope,omitempty"`
	EffectFingerprint string     `json:"effect_fingerprint"`
	State             string     `json:"state"` // one of the State constants
	Actor             string     `json:"actor,omitempty"`
	RemoteSystem      string     `json:"remote_system"` // the upstream's name in the routes file
	RemoteID          string     `json:"remote_id,omitempty"`
	RemoteURL         string     `json:"remote_url,omitempty"`
	ResponseStatus    int        `json:"response_status,omitempty"`
	CommittedAt       *time.Time `json:"committed_at,omitempty"`
	ExpiresAt         time.Time  `json:"expires_at"`
	Executions        int        `json:"executions"` // how many times the upstream was called for this key
	// ResponseBodyKept is false when the committed response's body was larger than the gateway
	// keeps (Options.MaxReceiptBodyBytes) or arrived broken: replays then carry no body.
	ResponseBodyKept bool `json:"response_body_kept"`
	// Detail says why an outcome is unknown.
	Detail string `json:"detail,omitempty"`
}

// record is the payload the gateway keeps in the store for one key: the receipt (without its
// state, which the store owns), the owner token of the current execution, and the stored response.
// It is kept in the framed binary form of encode, not JSON: a replay decodes it on every request.
type record struct {
	Receipt
	Owner     string
	StartedAt time.Time
	Response  *storedResponse
	// Document is the canonical document of the request that claimed the key, kept so that a
	// conflict can name the fields that differ; nil when larger than MaxRecordDocumentBytes.
	Document []byte
}

// MaxRecordDocumentBytes bounds the canonical document a record keeps (64 KiB). A request whose
// document is larger still gets its fingerprint checked; its conflicts carry no differing_fields.
const MaxRecordDocumentBytes = 64 << 10

// storedResponse is what a replay sends: the upstream's status, filtered headers and body.
type storedResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// recordMagic starts every encoded record: "idr" and the format version. A version this gateway
// does not know is refused as ErrCorruptRecord, so a newer format is never misread; the magic also
// differs from the encryption wrapper's, so a record in the clear is never taken for a sealed one.
var recordMagic = [4]byte{'i', 'd', 'r', 1}

// encode returns the record in its stored form: recordMagic, then every field in the fixed order
// of fields. Integers, lengths and counts are varints (encoding/binary's zigzag form); a string or
// byte field is its length and its bytes; a time is its Unix nanoseconds (0: none, or the zero
// time); a bool is the integer 0 or 1; headers are a count of names, then each name and its values
// (a count, then each value); the response is a presence bool followed by its status, headers
// and body. The result is built in one allocation.
func (rec *record) encode() []byte {
	e := recordEncoder{sizing: true}
	rec.fields(&e) // e.n counts the bytes, nothing is written
	e.buf = make([]byte, 0, e.n+len(recordMagic))
	e.buf = append(e.buf, recordMagic[:]...)
	e.sizing = false
	rec.fields(&e)
	return e.buf
}

// fields walks the record's fields in their stored order for e. decodeRecord reads them in the
// same order.
func (rec *record) fields(e *recordEncoder) {
	r := &rec.Receipt
	for _, s := range [...]string{r.IdempotencyKey, r.Tenant, r.Tool, r.CredentialScope, r.EffectFingerprint,
		r.Actor, r.RemoteSystem, r.RemoteID, r.RemoteURL, r.Detail, rec.Owner} {
		appendField(e, s)
	}
	e.int(int64(r.ResponseStatus))
	e.int(int64(r.Executions))
	e.bool(r.ResponseBodyKept)
	e.time(r.CommittedAt)
	e.time(&r.ExpiresAt)
	e.time(&rec.StartedAt)
	appendField(e, rec.Document)
	e.bool(rec.Response != nil)
	if resp := rec.Response; resp != nil {
		e.int(int64(resp.Status))
		e.int(int64(len(resp.Header)))
		for name, values := range resp.Header {
			appendField(e, name)
			e.int(int64(len(values)))
			for _, v := range values {
				appendField(e, v)
			}
		}
		appendField(e, resp.Body)
	}
}

// recordEncoder appends a record's fields to buf, or, while sizing, only counts their bytes in n.
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

// appendField appends a length-prefixed string or byte field.
func appendField[T string | []byte](e *recordEncoder, s T) {
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

func (e *recordEncoder) time(t *time.Time) {
	if t == nil || t.IsZero() {
		e.int(0)
		return
	}
	e.int(t.UnixNano())
}

// decodeRecord decodes a payload written by encode, with state as the store reports it. The
// record's strings share one copy of payload, and its Document and response body are slices of
// payload itself, which the caller must not change afterwards. A payload that is cut off, has bytes
// after its last field, holds an impossible value or starts with another magic is an error
// wrapping ErrCorruptRecord, naming the field.
func decodeRecord(state string, payload []byte) (*record, error) {
	if len(payload) < len(recordMagic) || [3]byte(payload[:3]) != [3]byte(recordMagic[:3]) {
		return nil, fmt.Errorf("%w: not a record (no %q magic)", ErrCorruptRecord, recordMagic[:3])
	}
	if v := payload[3]; v != recordMagic[3] {
		return nil, fmt.Errorf("%w: record format version %d; this gateway reads version %d", ErrCorruptRecord, v, recordMagic[3])
	}
	d := recordDecoder{raw: payload, str: string(payload), off: len(recordMagic)}
	rec := &record{Receipt: Receipt{State: state}}
	r := &rec.Receipt
	for _, f := range [...]struct {
		name string
		to   *string
	}{{"idempotency_key", &r.IdempotencyKey}, {"tenant", &r.Tenant}, {"tool", &r.Tool}, {"credential_scope", &r.CredentialScope},
		{"effect_fingerprint", &r.EffectFingerprint}, {"actor", &r.Actor}, {"remote_system", &r.RemoteSystem},
		{"remote_id", &r.RemoteID}, {"remote_url", &r.RemoteURL}, {"detail", &r.Detail}, {"owner", &rec.Owner}} {
		*f.to, _ = d.bytes(f.name)
	}
	r.ResponseStatus = d.intIn("response_status", 0, 999)
	r.Executions = d.intIn("executions", 0, math.MaxInt32)
	r.ResponseBodyKept = d.bool("response_body_kept")
	if t := d.time("committed_at"); !t.IsZero() {
		r.CommittedAt = &t
	}
	r.ExpiresAt = d.time("expires_at")
	rec.StartedAt = d.time("started_at")
	rec.Document = d.slice("document")
	if d.bool("response") {
		resp := &storedResponse{Status: d.intIn("response status", 100, 999)}
		if n := d.count("response header count"); n > 0 {
			resp.Header = make(http.Header, n)
			for range n {
				name, _ := d.bytes("response header name")
				values := make([]string, d.count("response header values"))
				for i := range values {
					values[i], _ = d.bytes("response header value")
				}
				resp.Header[name] = values
			}
		}
		resp.Body = d.slice("response body")
		rec.Response = resp
	}
	if d.err == nil && d.off != len(payload) {
		d.err = fmt.Errorf("%d bytes after the last field", len(payload)-d.off)
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptRecord, d.err)
	}
	return rec, nil
}

// recordDecoder reads the fields of an encoded record in order; after the first error every read
// returns a zero value and err keeps that error. str is the payload as one string, so that the
// record's strings share it.
type recordDecoder struct {
	raw []byte
	str string
	off int
	err error
}

// left is how many bytes are yet to read: a bound on any count or length still to come.
func (d *recordDecoder) left() int { return len(d.raw) - d.off }

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

// count reads a number of items to come, or a length in bytes: at most the bytes left after it.
func (d *recordDecoder) count(field string) int {
	at := d.off
	n := d.int(field)
	if d.err == nil && (n < 0 || n > int64(d.left())) {
		d.fail(field, at, fmt.Sprintf("%d items or bytes, with %d bytes left", n, d.left()))
		return 0
	}
	return int(n)
}

// bytes reads a length-prefixed field and returns it as a substring of str, and its offset.
func (d *recordDecoder) bytes(field string) (string, int) {
	n := d.count(field)
	start := d.off
	d.off += n
	return d.str[start:d.off], start
}

// slice reads a length-prefixed field as a slice of raw; nil when empty.
func (d *recordDecoder) slice(field string) []byte {
	s, start := d.bytes(field)
	if len(s) == 0 {
		return nil
	}
	return d.raw[start : start+len(s) : start+len(s)]
}

func (d *recordDecoder) bool(field string) bool {
	return d.intIn(field, 0, 1) == 1
}

// time reads a time written by recordEncoder.time: the zero time for 0.
func (d *recordDecoder) time(field string) time.Time {
	ns := d.int(field)
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// storedHeader returns the headers of an upstream response that a replay repeats: those of
// routes.DefaultReplayHeaders and of the route's receipt.replay_headers (an allow-list), less any
// header that routes.NeverReplayed names or the response's Connection header lists.
func storedHeader(h http.Header, extra []string) http.Header {
	out := make(http.Header)
	connection := map[string]bool{}
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			connection[http.CanonicalHeaderKey(strings.TrimSpace(name))] = true
		}
	}
	for _, list := range [][]string{routes.DefaultReplayHeaders, extra} {
		for _, name := range list {
			if values, ok := h[name]; ok && !connection[name] && !routes.NeverReplayed(name) {
				out[name] = append([]string(nil), values...)
			}
		}
	}
	return out
}
