package record

import (
	"bytes"
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// DefaultCompressMinBytes is the size from which the idemgateway command compresses a payload
// part: below it JSON shrinks by a third at most (a 1.2 KiB ticket to 70 %, a 4 KiB list to 40 %:
// docs/performance.md#stored-bytes), not worth the work on every execution and replay.
const DefaultCompressMinBytes = 4 << 10

// maxOpenedBytes bounds what a compressed part may decompress to (64 MiB, far above any record
// the gateway writes: a response body kept is at most gateway.Options.MaxReceiptBodyBytes, 1 MiB
// by default, and the document 64 KiB), so that a damaged part cannot make the gateway allocate
// without bound. A larger part is stored as it is.
const maxOpenedBytes = 64 << 20

// minCompressedBytes is the smallest part compressed, whatever the threshold: a Zstandard frame of
// less than 256 bytes need not state its size, which open requires.
const minCompressedBytes = 256

// maxExpansion is the most a Zstandard frame can decompress to per byte of it: a block holds at
// most 128 KiB and takes at least 4 bytes (a 3-byte header and, run-length encoded, 1 byte). A
// frame stating more than maxExpansion times its length is damaged, and is refused before any
// buffer of the size it states is allocated.
const maxExpansion = 128 << 10 / 4

// compressedMagic starts every part that Compressed wrote compressed: "idz" and a version.
// It differs from a record's ("idr"), from the encryption wrapper's ("idg1") and from JSON ('{'),
// so a part in any other form is never taken for a compressed one.
var compressedMagic = []byte("idz1")

// Compressed returns a Store that keeps each payload part (docs/record-format.md) of at least
// minBytes in store compressed with Zstandard (RFC 8878) at its default level: a stored answer
// and the request's canonical document are most of a record's bytes, and JSON shrinks to a
// quarter to a third. A part that would not lose at least an eighth of its bytes is kept as it
// is, so that no replay decompresses for little. minBytes 0 compresses nothing; parts stored
// compressed earlier are read whatever minBytes is, so compression can be turned off without a
// record becoming unreadable. The encoding is deterministic, so a transition sent twice carries
// the same bytes (docs/guarantees.md#lost-replies).
//
// The default level, not the fastest: klauspost/compress's fastest level stores some records of
// about 1.4 KiB raw, larger than they came (testdata/claim-fastest-stores-raw.bin), where the
// default level takes two thirds; it costs 40 to 60 % more time to compress, and the same to
// decompress.
//
// Wrap it around Encrypted, never inside: ciphertext does not compress.
func Compressed(store Store, minBytes int) Store {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithLowerEncoderMem(true))
	if err != nil {
		panic(err) // only invalid options fail, and these are constant
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxOpenedBytes), zstd.WithDecoderConcurrency(0))
	if err != nil {
		panic(err)
	}
	return coded(store, &compression{enc: enc, dec: dec, min: minBytes})
}

// compression is the payloadCodec of Compressed. Its encoder and decoder are safe for
// concurrent EncodeAll and DecodeAll calls, and start no goroutines for them.
type compression struct {
	enc *zstd.Encoder
	dec *zstd.Decoder
	min int
}

// seal compresses payload when it is at least c.min bytes long (and minCompressedBytes, and at
// most maxOpenedBytes) and compressing saves an eighth: the magic, then one Zstandard frame that
// states its decompressed size.
func (c *compression) seal(_ string, payload []byte) []byte {
	if c.min <= 0 || len(payload) < max(c.min, minCompressedBytes) || len(payload) > maxOpenedBytes {
		return payload
	}
	out := make([]byte, len(compressedMagic), len(compressedMagic)+len(payload))
	copy(out, compressedMagic)
	out = c.enc.EncodeAll(payload, out)
	if len(out) > len(payload)-len(payload)/8 {
		return payload
	}
	return out
}

// open decompresses a part that seal compressed, into a buffer of the size its frame states, which
// the record decoder then leaves the document and the body in (Decode copies neither); any other
// part is returned as it is. A frame stating more than it could hold (maxExpansion) is refused
// first, so that what a damaged part makes open allocate is bounded by its own length, and by
// maxOpenedBytes.
func (c *compression) open(_ string, payload []byte) ([]byte, error) {
	if !bytes.HasPrefix(payload, compressedMagic) {
		return payload, nil
	}
	frame := payload[len(compressedMagic):]
	var h zstd.Header
	switch err := h.Decode(frame); {
	case err != nil:
		return nil, fmt.Errorf("%w: a compressed part's frame header: %v", ErrCorrupt, err)
	case !h.HasFCS:
		return nil, fmt.Errorf("%w: a compressed part's frame states no size", ErrCorrupt)
	case h.FrameContentSize > maxOpenedBytes:
		return nil, fmt.Errorf("%w: a compressed part's frame states %d bytes, over the bound of %d", ErrCorrupt, h.FrameContentSize, maxOpenedBytes)
	case h.FrameContentSize > uint64(len(frame))*maxExpansion:
		return nil, fmt.Errorf("%w: a compressed part's frame of %d bytes states %d, more than it can hold", ErrCorrupt, len(frame), h.FrameContentSize)
	}
	plain, err := c.dec.DecodeAll(frame, make([]byte, 0, h.FrameContentSize))
	if err != nil {
		return nil, fmt.Errorf("%w: a compressed part does not decompress: %v", ErrCorrupt, err)
	}
	if uint64(len(plain)) != h.FrameContentSize {
		return nil, fmt.Errorf("%w: a compressed part decompresses to %d bytes, its frame says %d", ErrCorrupt, len(plain), h.FrameContentSize)
	}
	return plain, nil
}
