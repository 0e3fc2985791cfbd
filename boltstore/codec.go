package boltstore

import (
	"encoding/binary"
	"fmt"

	"github.com/idemgateway/idemgateway/record"
)

// formatVersion is the first byte of every encoded record.
const formatVersion = 1

// headerLen is the length of the fixed part of an encoded record.
const headerLen = 1 + 1 + 8 + 8 + 4

// entry is one record as the records bucket holds it. Times are Unix milliseconds of the local
// clock.
type entry struct {
	state      string // one of the record.State constants
	owner      string
	leaseUntil int64 // end of the owner's lease
	expiresAt  int64 // the record is absent from this instant on
	payload    []byte
}

// expired reports whether the record is gone at now.
func (r *entry) expired(now int64) bool { return now >= r.expiresAt }

// lapsed reports whether the record is in_progress with a lease that has passed at now.
func (r *entry) lapsed(now int64) bool {
	return r.state == record.StateInProgress && now >= r.leaseUntil
}

// ownedInProgress reports whether r is in_progress and owned by owner.
func (r *entry) ownedInProgress(owner string) bool {
	return r.state == record.StateInProgress && r.owner == owner
}

// stateCodes maps states to their byte in the encoding; the index is the code.
var stateCodes = [...]string{1: record.StateInProgress, 2: record.StateCommitted, 3: record.StateUnknown}

// encode returns the version 1 encoding of r, laid out as the package comment describes.
func (r *entry) encode() []byte {
	code := 0
	for c, s := range stateCodes {
		if s == r.state && s != "" {
			code = c
		}
	}
	b := make([]byte, headerLen, headerLen+len(r.owner)+len(r.payload))
	b[0] = formatVersion
	b[1] = byte(code)
	binary.BigEndian.PutUint64(b[2:], uint64(r.leaseUntil))
	binary.BigEndian.PutUint64(b[10:], uint64(r.expiresAt))
	binary.BigEndian.PutUint32(b[18:], uint32(len(r.owner)))
	b = append(b, r.owner...)
	return append(b, r.payload...)
}

// decode parses an encoding made by encode. It copies everything out of b, which bbolt owns only
// for the length of a transaction.
func decode(b []byte) (*entry, error) {
	if len(b) < headerLen {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the header", record.ErrCorrupt, len(b))
	}
	if b[0] != formatVersion {
		return nil, fmt.Errorf("%w: format version %d, want %d", record.ErrCorrupt, b[0], formatVersion)
	}
	if int(b[1]) >= len(stateCodes) || stateCodes[b[1]] == "" {
		return nil, fmt.Errorf("%w: state code %d", record.ErrCorrupt, b[1])
	}
	n := binary.BigEndian.Uint32(b[18:])
	if uint64(n) > uint64(len(b)-headerLen) {
		return nil, fmt.Errorf("%w: owner length %d beyond the value", record.ErrCorrupt, n)
	}
	return &entry{
		state:      stateCodes[b[1]],
		leaseUntil: int64(binary.BigEndian.Uint64(b[2:])),
		expiresAt:  int64(binary.BigEndian.Uint64(b[10:])),
		owner:      string(b[headerLen : headerLen+int(n)]),
		payload:    append([]byte{}, b[headerLen+int(n):]...),
	}, nil
}
