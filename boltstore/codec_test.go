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
		{state: record.StateInProgress, owner: "owner", leaseUntil: 1, expiresAt: 2, payload: []byte("p")},
		{state: record.StateCommitted, owner: "", leaseUntil: -1, expiresAt: 1<<62 + 3, payload: nil},
		{state: record.StateUnknown, owner: "ü\x00}", leaseUntil: 1700000000000, expiresAt: 1700000000001, payload: []byte{0, 0xff, 0}},
	}
	for _, want := range cases {
		got, err := decode(want.encode())
		if err != nil {
			t.Fatalf("decode(encode(%+v)): %v", want, err)
		}
		if got.state != want.state || got.owner != want.owner || got.leaseUntil != want.leaseUntil ||
			got.expiresAt != want.expiresAt || !bytes.Equal(got.payload, want.payload) {
			t.Errorf("decode(encode(%+v)) = %+v", want, got)
		}
	}
}

func TestCodecVersion1Layout(t *testing.T) {
	t.Parallel()
	r := entry{state: record.StateCommitted, owner: "ab", leaseUntil: 0x0102, expiresAt: 0x0304, payload: []byte("xyz")}
	want := []byte{
		1, 2,
		0, 0, 0, 0, 0, 0, 1, 2,
		0, 0, 0, 0, 0, 0, 3, 4,
		0, 0, 0, 2, 'a', 'b',
		'x', 'y', 'z',
	}
	if got := r.encode(); !bytes.Equal(got, want) {
		t.Errorf("encode() = %v, want %v", got, want)
	}
}

func TestCodecRefusesCorruptValues(t *testing.T) {
	t.Parallel()
	valid := (&entry{state: record.StateInProgress, owner: "owner", payload: []byte("p")}).encode()
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
		{"version 2", with(0, 2)},
		{"state 0", with(1, 0)},
		{"state 4", with(1, 4)},
		{"owner longer than value", with(21, 200)},
		{"owner length overflow", with(18, 0xff)},
	}
	for _, tc := range cases {
		if _, err := decode(tc.value); !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("%s: decode = %v, want record.ErrCorrupt", tc.name, err)
		}
	}
}
