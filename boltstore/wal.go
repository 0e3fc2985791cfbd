package boltstore

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
)

// The write-ahead log. Group commit (commit.go) makes each batch of transitions durable with one
// append to the log and one fdatasync, where a bbolt transaction would cost two fdatasyncs (its
// pages, then its meta page) of pages spread over the file. The batches reach the bbolt file later,
// many at once, at a checkpoint (checkpoint.go); until then the memtables serve them. Open applies
// the batches the log holds past the last checkpoint to the bbolt file (Store.recoverLog).
//
// The log is two files, the segments WALNames[0] and WALNames[1] in the data directory. Batches are
// appended to one segment; when a checkpoint starts, appends move to the other, which the previous
// checkpoint has released, and the checkpoint releases the first once the bbolt file holds its
// batches: the next appends to it start again at its beginning, over the records it holds, which
// are then stale. A segment is never truncated: it grows, in zeroed chunks of walChunk, to what it
// needs, and stays so, so that an append's fdatasync writes data, never the file's size or its
// blocks (a third less CPU here than on a growing file). A segment is a sequence of records, one
// per batch, integers big-endian:
//
//	offset  size  field
//	0       4     n, length of the body (uint32)
//	4       4     CRC-32C (Castagnoli) of the body
//	8       n     the body: generation (uint64), seq (uint64), then each write of the batch, in
//	              the order the batch first wrote its key: op (1 byte: opDelete, opPut,
//	              opPutUnknown), key length (uvarint), key, and for a put the value's length
//	              (uvarint) and the value
//
// seq numbers the batches from 1, one more per batch across both segments, and is never used twice:
// the meta bucket of the bbolt file keeps, under walSeqKey, the seq of the last batch a checkpoint
// applied. generation is random, drawn anew each time the segment is opened or released, and the
// same in every record appended until then. Reading a segment takes the generation of its first
// record, skips its first records up to that seq, and stops at the first record that is short,
// fails its CRC, is of another generation, or whose seq is not the one after the previous record's:
// what follows was never acknowledged (a batch is answered only after its fdatasync), or is stale,
// left from before the segment was released, or the zeros of its last chunk. The generation is what
// keeps stale bytes from passing as a record: a value stored earlier, whose bytes a client or an
// upstream chose, can hold a whole record with a valid CRC and the next seq, but not a generation
// drawn after it was written (TestWALStaleValueCannotForgeARecord).

// WALNames are the names of the write-ahead log's two segments in the data directory.
var WALNames = [2]string{"idemgateway.0.wal", "idemgateway.1.wal"}

// Operations of a write in a log record.
const (
	opDelete     = 0
	opPut        = 1
	opPutUnknown = 2 // a put of a record in outcome_unknown: the checkpoint indexes it
)

// walHeaderLen is the length of a record's header: its body's length and CRC.
const walHeaderLen = 8

// walChunk is how much a segment grows by when an append would pass its end.
const walChunk = 4 << 20

// maxKeptBuffer bounds the encoding buffer the log keeps between appends.
const maxKeptBuffer = 1 << 20

// walTable is the CRC of the log's records.
var walTable = crc32.MakeTable(crc32.Castagnoli)

// write is one write of a batch: a put of value, or a delete.
type write struct {
	key     string
	value   []byte
	del     bool
	unknown bool // the record put is in outcome_unknown
}

// logRecord is one record of the log: a batch's seq and writes.
type logRecord struct {
	seq    uint64
	writes []write
}

// wal is one open segment of the log. The committer appends to it; the checkpoint of its batches
// releases it, while the committer appends to the other.
type wal struct {
	f    *os.File
	gen  uint64 // the generation of the records appended since the segment was released
	size int64  // the end of the last record appended since the segment was released
	end  int64  // the file's size, zeros past size
	buf  []byte // the record being encoded, kept between appends
}

// walBodyHead is the length of a record body's generation and seq.
const walBodyHead = 16

// newGeneration returns a random generation for a segment's next records.
func newGeneration() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return binary.BigEndian.Uint64(b[:])
}

// openWAL opens (creating them if missing) the log's segments in dir and syncs dir, so that a
// segment created now is still there after a power cut.
func openWAL(dir string) (segments [2]*wal, err error) {
	for i, name := range WALNames {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			closeWAL(segments)
			return segments, err
		}
		info, err := f.Stat()
		if err != nil {
			_ = f.Close()
			closeWAL(segments)
			return segments, err
		}
		segments[i] = &wal{f: f, gen: newGeneration(), end: info.Size()}
	}
	if err := syncDir(dir); err != nil {
		closeWAL(segments)
		return segments, err
	}
	return segments, nil
}

// closeWAL closes the segments that are open.
func closeWAL(segments [2]*wal) error {
	var errs []error
	for _, l := range segments {
		if l != nil {
			errs = append(errs, l.f.Close())
		}
	}
	return errors.Join(errs...)
}

// syncDir fsyncs the directory dir: its entries (a file created in it) become durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// append writes writes as the record seq at the end of the segment and syncs it. On an error the
// record may or may not be durable: the caller must stop using the log (Store.fail).
func (l *wal) append(seq uint64, writes []write) error {
	b := slices.Grow(l.buf[:0], walHeaderLen+walBodyHead)[:walHeaderLen]
	b = binary.BigEndian.AppendUint64(b, l.gen)
	b = binary.BigEndian.AppendUint64(b, seq)
	for _, w := range writes {
		op := byte(opPut)
		switch {
		case w.del:
			op = opDelete
		case w.unknown:
			op = opPutUnknown
		}
		b = append(b, op)
		b = binary.AppendUvarint(b, uint64(len(w.key)))
		b = append(b, w.key...)
		if !w.del {
			b = binary.AppendUvarint(b, uint64(len(w.value)))
			b = append(b, w.value...)
		}
	}
	body := b[walHeaderLen:]
	if len(body) > math.MaxUint32 {
		return fmt.Errorf("write-ahead log: a batch of %d bytes, more than a record holds", len(body))
	}
	binary.BigEndian.PutUint32(b[0:], uint32(len(body)))
	binary.BigEndian.PutUint32(b[4:], crc32.Checksum(body, walTable))
	l.buf = b
	if cap(l.buf) > maxKeptBuffer {
		l.buf = nil // one large batch does not pin its buffer
	}
	if err := l.grow(l.size + int64(len(b))); err != nil {
		return err
	}
	if _, err := l.f.WriteAt(b, l.size); err != nil {
		return fmt.Errorf("write-ahead log: write: %w", err)
	}
	if err := fdatasync(l.f); err != nil {
		return fmt.Errorf("write-ahead log: sync: %w", err)
	}
	l.size += int64(len(b))
	return nil
}

// grow zeroes the segment up to at least size, in chunks of walChunk. The append's fdatasync makes
// them durable with its record.
func (l *wal) grow(size int64) error {
	if size <= l.end {
		return nil
	}
	end := (size + walChunk - 1) / walChunk * walChunk
	zeros := make([]byte, min(end-l.end, walChunk))
	for off := l.end; off < end; off += int64(len(zeros)) {
		if _, err := l.f.WriteAt(zeros[:min(int64(len(zeros)), end-off)], off); err != nil {
			return fmt.Errorf("write-ahead log: grow: %w", err)
		}
	}
	l.end = end
	return nil
}

// release makes the segment's next append start at its beginning, of a new generation, once a
// checkpoint has applied every record in it: they are stale from then on, for every later read
// (the package comment), so nothing is written.
func (l *wal) release() { l.size, l.gen = 0, newGeneration() }

// read returns the records of the segment past seq after, in order, as the package comment says.
// It stops without an error at the end of what was acknowledged; only a failed read of the file is
// an error.
func (l *wal) read(after uint64) (records []logRecord, err error) {
	info, err := l.f.Stat()
	if err != nil {
		return nil, fmt.Errorf("write-ahead log: %w", err)
	}
	r := bufio.NewReader(io.NewSectionReader(l.f, 0, info.Size()))
	var head [walHeaderLen]byte
	var body []byte
	var gen uint64
	for i, left := 0, info.Size(); ; i++ {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return records, readEnd(err)
		}
		n := int64(binary.BigEndian.Uint32(head[0:]))
		if left -= walHeaderLen; n < walBodyHead || n > left {
			return records, nil // a torn header, or a body cut short: never allocated at its length
		}
		left -= n
		body = slices.Grow(body[:0], int(n))[:n]
		if _, err := io.ReadFull(r, body); err != nil {
			return records, readEnd(err)
		}
		if crc32.Checksum(body, walTable) != binary.BigEndian.Uint32(head[4:]) {
			return records, nil
		}
		if g := binary.BigEndian.Uint64(body); i == 0 {
			gen = g
		} else if g != gen {
			return records, nil
		}
		seq := binary.BigEndian.Uint64(body[8:])
		switch {
		case seq <= after && len(records) == 0:
			continue // applied by a checkpoint already, and the segment not released since
		case len(records) > 0 && seq != records[len(records)-1].seq+1:
			return records, nil
		}
		writes, ok := decodeWrites(body[walBodyHead:])
		if !ok {
			return records, nil // the CRC matched a body this version does not write: stop
		}
		records = append(records, logRecord{seq, writes})
	}
}

// readEnd turns the error that ended a read of the log into read's: the end of the file, or a
// record cut short by it, is the end of the log.
func readEnd(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil
	}
	return fmt.Errorf("write-ahead log: read: %w", err)
}

// decodeWrites decodes the writes of a record's body after its generation and seq; ok is false
// when they do not decode. The writes' keys and values are copies.
func decodeWrites(b []byte) (writes []write, ok bool) {
	for len(b) > 0 {
		op := b[0]
		b = b[1:]
		key, rest, ok := cutBytes(b)
		if !ok || op > opPutUnknown {
			return nil, false
		}
		w := write{key: string(key), del: op == opDelete, unknown: op == opPutUnknown}
		b = rest
		if !w.del {
			var value []byte
			if value, b, ok = cutBytes(b); !ok {
				return nil, false
			}
			w.value = slices.Clone(value)
		}
		writes = append(writes, w)
	}
	return writes, true
}

// cutBytes splits b after a uvarint length and that many bytes.
func cutBytes(b []byte) (value, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
}
