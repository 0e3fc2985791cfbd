package record_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/idemgateway/idemgateway/internal/allocs"
	"github.com/idemgateway/idemgateway/internal/fixtures"
	"github.com/idemgateway/idemgateway/record"
)

// newCompressed returns a store that compresses from minBytes around an embedded one, and the
// embedded one, which shows what is stored.
func newCompressed(t *testing.T, minBytes int) (record.Store, record.Store) {
	t.Helper()
	plain := openPlain(t)
	return record.Compressed(plain, minBytes), plain
}

// ticketRecord is a committed record whose stored answer is body, as the gateway settles it.
func ticketRecord(body []byte) *record.Record {
	now := time.Date(2026, 12, 7, 15, 0, 0, 0, time.UTC)
	return &record.Record{
		Receipt: record.Receipt{IdempotencyKey: "k", Tenant: "acme", Tool: "list_tickets", EffectFingerprint: "sha256:" + string(bytes.Repeat([]byte("ab"), 32)),
			ResponseStatus: 200, Executions: 1, ResponseBodyKept: true, CommittedAt: &now, ExpiresAt: now.Add(24 * time.Hour)},
		Owner: "owner-1", StartedAt: now,
		Response: &record.Response{Status: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: body},
	}
}

// TestCompressedStoresUnderAThird (docs/performance.md#stored-bytes): a ticket list's answer is
// stored in under a third of its bytes, and read back as it was; a part under the threshold, and
// one that does not compress, are stored as they are.
func TestCompressedStoresUnderAThird(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	comp, plain := newCompressed(t, record.DefaultCompressMinBytes)
	for _, c := range []struct {
		name  string
		body  []byte
		ratio float64 // the settle part stored, over the answer's bytes, at most
	}{{"16k", fixtures.Tickets16K, 0.35}, {"256k", fixtures.Tickets256K, 0.30}} {
		rec := ticketRecord(c.body)
		claim := (&record.Record{Receipt: rec.Receipt, Owner: rec.Owner, StartedAt: rec.StartedAt, Document: []byte(`{"query":"status:open"}`)}).Encode()
		settle := rec.EncodeSettle()
		if claimed, _, _, err := comp.Claim(ctx, c.name, "owner-1", claim, time.Minute, time.Hour); !claimed || err != nil {
			t.Fatal(claimed, err)
		}
		if ok, err := comp.Commit(ctx, c.name, "owner-1", settle, 0); !ok || err != nil {
			t.Fatal(ok, err)
		}
		_, raw, err := plain.Get(ctx, c.name)
		if err != nil {
			t.Fatal(err)
		}
		if got := float64(len(raw.Settle)) / float64(len(c.body)); !bytes.HasPrefix(raw.Settle, []byte("idz1")) || got > c.ratio {
			t.Errorf("%s: stored %d bytes for a %d-byte answer (%.2f, want at most %.2f), starting %q", c.name, len(raw.Settle), len(c.body), got, c.ratio, raw.Settle[:4])
		}
		if !bytes.Equal(raw.Claim, claim) {
			t.Errorf("%s: a %d-byte claim part was stored as %d bytes, want as it is", c.name, len(claim), len(raw.Claim))
		}
		state, got, err := comp.Get(ctx, c.name)
		if err != nil || !bytes.Equal(got.Settle, settle) {
			t.Fatalf("%s: Get = %d bytes, %v; want the settle part back", c.name, len(got.Settle), err)
		}
		if back, err := record.Decode(state, got); err != nil || !bytes.Equal(back.Response.Body, c.body) {
			t.Fatalf("%s: the record read back: %v", c.name, err)
		}
	}

	noise := make([]byte, 16<<10)
	_, _ = rand.Read(noise)
	small := fixtures.Tickets16K[:record.DefaultCompressMinBytes-1]
	for name, part := range map[string][]byte{"noise": noise, "small": small} {
		if claimed, _, _, err := comp.Claim(ctx, name, "o", part, time.Minute, time.Hour); !claimed || err != nil {
			t.Fatal(claimed, err)
		}
		if _, raw, err := plain.Get(ctx, name); err != nil || !bytes.Equal(raw.Claim, part) {
			t.Errorf("%s: stored %d bytes, want the %d bytes as they are (%v)", name, len(raw.Claim), len(part), err)
		}
	}
}

// TestCompressedStoresEveryRecord: a claim part of 1 446 bytes that klauspost/compress's fastest
// level stored raw (gateway TestStoredBytes met it once in a dozen runs) is stored compressed.
func TestCompressedStoresEveryRecord(t *testing.T) {
	t.Parallel()
	part, err := os.ReadFile("testdata/claim-fastest-stores-raw.bin")
	if err != nil {
		t.Fatal(err)
	}
	comp, plain := newCompressed(t, 1<<10)
	if claimed, _, _, err := comp.Claim(context.Background(), "k", "o", part, time.Minute, time.Hour); !claimed || err != nil {
		t.Fatal(claimed, err)
	}
	_, raw, err := plain.Get(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(raw.Claim, []byte("idz1")) || len(raw.Claim) > len(part)*3/4 {
		t.Errorf("a %d-byte claim part stored as %d bytes starting %q, want compressed to at most three quarters", len(part), len(raw.Claim), raw.Claim[:4])
	}
}

// TestCompressedRoundTripsEverySize: every part reads back as it was given, from 1 byte up; parts
// under 256 bytes are stored as they are (a smaller Zstandard frame need not state its size, which
// a compressed part must), and so is a part over the 64 MiB a compressed one may open to.
func TestCompressedRoundTripsEverySize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	comp, plain := newCompressed(t, 1)
	for _, n := range []int{1, 100, 200, 255, 256, 257, 300, 1000, 5000} {
		part := fixtures.Tickets16K[:n]
		key := fmt.Sprint(n)
		if claimed, _, _, err := comp.Claim(ctx, key, "o", part, time.Minute, time.Hour); !claimed || err != nil {
			t.Fatal(claimed, err)
		}
		_, raw, err := plain.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if compressed := bytes.HasPrefix(raw.Claim, []byte("idz1")); compressed != (n >= 256) {
			t.Errorf("%d bytes: stored compressed %v, want %v", n, compressed, n >= 256)
		}
		if _, got, err := comp.Get(ctx, key); err != nil || !bytes.Equal(got.Claim, part) {
			t.Errorf("%d bytes: read back %d bytes, %v", n, len(got.Claim), err)
		}
	}
	huge := &onePart{}
	big := bytes.Repeat([]byte(`{"a":1}`), 64<<20/7+1) // just over 64 MiB, and compressible
	if ok, err := record.Compressed(huge, 1).Commit(ctx, "k", "o", big, 0); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if len(huge.settle) != len(big) {
		t.Errorf("a part of %d bytes, over what a compressed part may open to, was stored as %d bytes", len(big), len(huge.settle))
	}
}

// TestCompressedOffStillReads: with compression off (minBytes 0) nothing is compressed, and a part
// compressed earlier still reads; a call sealed twice gives the same bytes, so that a store
// recognizes a transition sent again after its answer was lost (docs/guarantees.md#lost-replies).
func TestCompressedOffStillReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	on, plain := newCompressed(t, record.DefaultCompressMinBytes)
	off := record.Compressed(plain, 0)
	stored := func(s record.Store, key string) []byte {
		t.Helper()
		if _, err := plain.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		if claimed, _, _, err := s.Claim(ctx, key, "o", fixtures.Tickets16K, time.Minute, time.Hour); !claimed || err != nil {
			t.Fatal(claimed, err)
		}
		_, raw, err := plain.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return raw.Claim
	}
	first := stored(on, "k")
	if again := stored(on, "k"); !bytes.Equal(again, first) || len(first) >= len(fixtures.Tickets16K) {
		t.Errorf("the same part compressed twice: %d and %d bytes, not the same (or not smaller)", len(first), len(again))
	}
	if _, got, err := off.Get(ctx, "k"); err != nil || !bytes.Equal(got.Claim, fixtures.Tickets16K) {
		t.Errorf("with compression off, a compressed part reads as %d bytes, %v", len(got.Claim), err)
	}
	if raw := stored(off, "k2"); !bytes.Equal(raw, fixtures.Tickets16K) {
		t.Errorf("with compression off, a %d-byte part was stored as %d bytes", len(fixtures.Tickets16K), len(raw))
	}
}

// TestCompressedRefusesDamage: a compressed part that is cut off, states no size, states a size
// over the bound, or decompresses to another size than it states is corrupt (the gateway answers
// 500 corrupt-record and calls no upstream), never a record and never a large allocation.
func TestCompressedRefusesDamage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	comp, plain := newCompressed(t, record.DefaultCompressMinBytes)
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	frame := enc.EncodeAll(fixtures.Tickets16K, nil)
	// Frame headers: the magic, a descriptor, then a window or a size, and an empty last raw
	// block. One states no content size (a window of 1 MiB instead); one states 1 TiB.
	unsized := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x50, 0x01, 0x00, 0x00}
	huge := binary.LittleEndian.AppendUint64([]byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0}, 1<<40)
	huge = append(huge, 0x01, 0x00, 0x00)
	// A frame stating 64 MiB, its one block compressed (type 2) but cut off: what decoding it
	// allocates stays far under what it states.
	claims64 := binary.LittleEndian.AppendUint64([]byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0}, 64<<20)
	claims64 = append(claims64, 0x05, 0x10, 0x00, 0x00)
	for name, part := range map[string][]byte{
		"cut":      frame[:len(frame)-9],
		"unsized":  unsized,
		"huge":     huge,
		"claims64": claims64,
		"twoframe": append(append([]byte{}, frame...), frame...),
	} {
		if claimed, _, _, err := plain.Claim(ctx, name, "o", append([]byte("idz1"), part...), time.Minute, time.Hour); !claimed || err != nil {
			t.Fatal(claimed, err)
		}
		if _, got, err := comp.Get(ctx, name); !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("%s: Get = %d bytes, %v; want ErrCorrupt", name, len(got.Claim), err)
		}
	}
	if n := allocs.Bytes(5, func() { _, _, _ = comp.Get(ctx, "claims64") }); n > 4<<20 {
		t.Errorf("reading a part whose frame states 64 MiB allocated %d bytes, want at most 4 MiB", n)
	}

	// A page of outcome_unknown records with one damaged among them still lists: the damaged
	// one's parts as they are stored, which Decode refuses, the other's opened.
	if _, _, _, err := plain.Claim(ctx, "list/bad", "o", append([]byte("idz1"), frame[:len(frame)-9]...), time.Minute, time.Hour); err != nil {
		t.Fatal(err)
	}
	good := ticketRecord(fixtures.Tickets16K)
	if _, _, _, err := comp.Claim(ctx, "list/good", "o", good.Encode(), time.Minute, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"list/bad", "list/good"} {
		if ok, err := plain.MarkUnknown(ctx, key, "o", nil, time.Hour); !ok || err != nil {
			t.Fatal(key, ok, err)
		}
	}
	keys, stored, _, err := comp.ListUnknown(ctx, "list/", "", 10)
	if err != nil || len(keys) != 2 {
		t.Fatalf("ListUnknown = %q, %v; want both records", keys, err)
	}
	for i, key := range keys {
		_, err := record.Decode(record.StateUnknown, stored[i])
		if bad := key == "list/bad"; bad != errors.Is(err, record.ErrCorrupt) || !bad && err != nil {
			t.Errorf("%s: Decode of its listed payload = %v", key, err)
		}
	}
}

// onePart is a store of one settle part, in memory, so that BenchmarkCompression times the codec
// alone: every method it does not define is a nil Store's, and panics.
type onePart struct {
	record.Store
	settle []byte
}

func (p *onePart) Commit(_ context.Context, _, _ string, settle []byte, _ time.Duration) (bool, error) {
	p.settle = settle
	return true, nil
}

func (p *onePart) Get(context.Context, string) (string, record.Payload, error) {
	return record.StateCommitted, record.Payload{Claim: []byte("claim"), Settle: p.settle}, nil
}

// BenchmarkCompression measures what compressing from 1 KiB costs a record's settle part, on the
// help desk's JSON (internal/fixtures): a ticket as a create answers it, and ticket lists of
// 16 KiB and 256 KiB. seal runs once per execution, open once per replay; stored/answer is the
// stored part's size over the answer's.
func BenchmarkCompression(b *testing.B) {
	var list struct{ Tickets []json.RawMessage }
	if err := json.Unmarshal(fixtures.Tickets16K, &list); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		body []byte
	}{{"ticket", list.Tickets[0]}, {"16KiB", fixtures.Tickets16K}, {"256KiB", fixtures.Tickets256K}} {
		settle := ticketRecord(c.body).EncodeSettle()
		part := &onePart{}
		comp := record.Compressed(part, 1<<10)
		b.Run(c.name+"/seal", func(b *testing.B) {
			b.SetBytes(int64(len(settle)))
			for b.Loop() {
				_, _ = comp.Commit(ctx, "k", "owner-1", settle, 0)
			}
			b.ReportMetric(float64(len(part.settle))/float64(len(c.body)), "stored/answer")
		})
		b.Run(c.name+"/open", func(b *testing.B) {
			b.SetBytes(int64(len(settle)))
			for b.Loop() {
				if _, _, err := comp.Get(ctx, "k"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
