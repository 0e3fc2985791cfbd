package boltstore

import (
	"bytes"
	"errors"
	"testing"

	"github.com/idemgateway/idemgateway/record"
)

func TestCodecRoundTrip(t *testing.T) {
	t.Parallel()
	cases := []entry{
		{state: record.StateInProgress, owner: "owner", leaseUntil: 1, expiresAt: 2, claim: []byte("p")},
		{state: record.StateCommitted, owner: "", leaseUntil: -1, expiresAt: 1<<62 + 3, claim: nil, settle: []byte("s")},
		{state: record.StateUnknown, owner: "ü\x00}", leaseUntil: 1700000000000, expiresAt: 1700000000001, claim: []byte{0, 0xff, 0}, settle: []byte{0xff}},
		{state: record.StateCommitted, owner: "o", claim: []byte("c"), settle: nil},
	}
	for _, want := range cases {
		got, err := decode(want.encode())
		if err != nil {
			t.Fatalf("decode(encode(%+v)): %v", want, err)
		}
		if got.state != want.state || got.owner != want.owner || got.leaseUntil != want.leaseUntil ||
			got.expiresAt != want.expiresAt || !bytes.Equal(got.claim, want.claim) || !bytes.Equal(got.settle, want.settle) {
			t.Errorf("decode(encode(%+v)) = %+v", want, got)
		}
	}
}

// TestCodecDecodeAnswer: what a Claim answers is decoded without a settled record's claim part,
// which a replay does not need, and with the claim part of a record that has no settle part (in
// progress, lapsed, or written before the split).
func TestCodecDecodeAnswer(t *testing.T) {
	t.Parallel()
	settled := entry{state: record.StateCommitted, owner: "o", claim: []byte("document"), settle: []byte("receipt")}
	got, err := decodeAnswer(settled.encode())
	if err != nil || got.claim != nil || string(got.settle) != "receipt" || got.owner != "o" {
		t.Errorf("decodeAnswer(settled) = %+v, %v; want the settle part alone", got, err)
	}
	unsettled := entry{state: record.StateInProgress, owner: "o", claim: []byte("document")}
	got, err = decodeAnswer(unsettled.encode())
	if err != nil || string(got.claim) != "document" || got.settle != nil {
		t.Errorf("decodeAnswer(in progress) = %+v, %v; want the claim part", got, err)
	}
}

func TestCodecVersion2Layout(t *testing.T) {
	t.Parallel()
	r := entry{state: record.StateCommitted, owner: "ab", leaseUntil: 0x0102, expiresAt: 0x0304, claim: []byte("xyz"), settle: []byte("st")}
	want := []byte{
		2, 2,
		0, 0, 0, 0, 0, 0, 1, 2,
		0, 0, 0, 0, 0, 0, 3, 4,
		0, 0, 0, 2,
		0, 0, 0, 3,
		'a', 'b',
		'x', 'y', 'z',
		's', 't',
	}
	if got := r.encode(); !bytes.Equal(got, want) {
		t.Errorf("encode() = %v, want %v", got, want)
	}
}

// TestCodecReadsVersion1: a value written before the payload was split still reads, its payload
// as the claim part.
func TestCodecReadsVersion1(t *testing.T) {
	t.Parallel()
	v1 := []byte{
		1, 2,
		0, 0, 0, 0, 0, 0, 1, 2,
		0, 0, 0, 0, 0, 0, 3, 4,
		0, 0, 0, 2, 'a', 'b',
		'x', 'y', 'z',
	}
	got, err := decode(v1)
	if err != nil {
		t.Fatal(err)
	}
	if got.state != record.StateCommitted || got.owner != "ab" || got.leaseUntil != 0x0102 || got.expiresAt != 0x0304 ||
		string(got.claim) != "xyz" || got.settle != nil {
		t.Errorf("decode(version 1) = %+v", got)
	}
}

func TestCodecRefusesCorruptValues(t *testing.T) {
	t.Parallel()
	valid := (&entry{state: record.StateInProgress, owner: "owner", claim: []byte("p")}).encode()
	with := func(i int, b byte) []byte {
		v := bytes.Clone(valid)
		v[i] = b
		return v
	}
	cases := []struct {
		name  string
		value []byte
	}{
		{"empty", []byte{}},
		{"short header", valid[:headerLen-1]},
		{"version 0", with(0, 0)},
		{"version 3", with(0, 3)},
		{"state 0", with(1, 0)},
		{"state 4", with(1, 4)},
		{"owner longer than value", with(21, 200)},
		{"owner length overflow", with(18, 0xff)},
		{"claim longer than value", with(25, 200)},
		{"claim length overflow", with(22, 0xff)},
		{"version 1, short header", with(0, 1)[:headerLenV1-1]},
	}
	for _, tc := range cases {
		if _, err := decode(tc.value); !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("%s: decode = %v, want record.ErrCorrupt", tc.name, err)
		}
	}
}
