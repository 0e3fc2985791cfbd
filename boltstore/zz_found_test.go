package boltstore

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"testing"
)

// TestWALStaleValueForgesARecord: found while attacking the write-ahead log, NOT FIXED. A released
// segment keeps its old bytes, and reading stops only at a record that is short, fails its CRC or
// has not the next seq. A value written earlier (a payload, whose bytes a client or an upstream may
// choose) can hold bytes that parse as a whole record with a valid CRC and the seq after the last
// one appended since the release; when the new records end exactly where it starts, Open applies
// it as a batch that was never made. The CRC is no defence: anyone can compute it. The fix is not
// small (a per-release salt or generation in each record, checked on read, or a CRC seeded with
// one), so the test is skipped; BOLTSTORE_FOUND=1 runs it.
func TestWALStaleValueForgesARecord(t *testing.T) {
	if os.Getenv("BOLTSTORE_FOUND") == "" {
		t.Skip("known, not fixed: a stale value in a released segment can forge a record (see the comment); BOLTSTORE_FOUND=1 runs it")
	}
	// The forged record: seq 3, a put of "evil".
	body := binary.BigEndian.AppendUint64(nil, 3)
	body = append(body, opPut, 4)
	body = append(body, "evil"...)
	body = append(body, 1, 'x')
	forged := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	forged = binary.BigEndian.AppendUint32(forged, crc32.Checksum(body, walTable))
	forged = append(forged, body...)

	next := []write{{key: "b", value: []byte("vb")}} // seq 2, appended after the release
	f, err := os.CreateTemp(t.TempDir(), "probe")    // to learn the length of seq 2's record
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	probe := wal{f: f}
	if err := probe.append(2, next); err != nil {
		t.Fatal(err)
	}
	nextLen := probe.size
	// Seq 1 holds a value whose bytes, at offset nextLen of the segment, are the forged record.
	prefix := walHeaderLen + 8 + 1 + 1 + 1 + 1 // header, seq, op, key length, key "a", value length (< 128)
	pad := int(nextLen) - prefix
	value := append(make([]byte, pad), forged...)
	l, _ := newWAL(t, [][]write{{{key: "a", value: value}}})
	// Checkpointed up to seq 1 and released; seq 2 is appended over it.
	l.release()
	if err := l.append(2, next); err != nil {
		t.Fatal(err)
	}
	got, last := readAll(t, l, 1)
	if last != 2 || !equalWrites(got, [][]write{next}) {
		t.Errorf("read(1) = %+v, last %d; want seq 2 alone: the rest is the stale value of seq 1", got, last)
	}
}
