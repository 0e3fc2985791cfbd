package boltstore

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The record states of the gateway's Store contract (gateway.StateInProgress, StateCommitted,
// StateUnknown), spelled here so that this package imports nothing of the gateway's; the
// conformance suite (gateway/storetest) fails if they ever disagree.
const (
	stateInProgress = "in_progress"
	stateCommitted  = "committed"
	stateUnknown    = "outcome_unknown"
)

// ErrCorrupt is wrapped by the errors of operations on a key whose stored value is not a valid
// record (unknown version or state, truncated). The store refuses to read, overwrite or free such a
// record; Delete removes it.
var ErrCorrupt = errors.New("not a valid idemgateway record")

// formatVersion is the first byte of every encoded record.
const formatVersion = 1

// headerLen is the length of the fixed part of an encoded record.
const headerLen = 1 + 1 + 8 + 8 + 4

// record is one idempotency record. Times are Unix milliseconds of the local clock.
type record struct {
	state      string // one of the gateway.State constants
	owner      string
	leaseUntil int64 // end of the owner's lease
	expiresAt  int64 // the record is absent from this instant on
	payload    []byte
}

// expired reports whether the record is gone at now.
func (r *record) expired(now int64) bool { return now >= r.expiresAt }

// lapsed reports whether the record is in_progress with a lease that has passed at now.
func (r *record) lapsed(now int64) bool {
	return r.state == stateInProgress && now >= r.leaseUntil
}

// ownedInProgress reports whether r is in_progress and owned by owner.
func (r *record) ownedInProgress(owner string) bool {
	return r.state == stateInProgress && r.owner == owner
}

// stateCodes maps states to their byte in the encoding; the index is the code.
var stateCodes = [...]string{1: stateInProgress, 2: stateCommitted, 3: stateUnknown}

// encode returns the version 1 encoding of r, laid out as the package comment describes.
func (r *record) encode() []byte {
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
func decode(b []byte) (*record, error) {
	if len(b) < headerLen {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the header", ErrCorrupt, len(b))
	}
	if b[0] != formatVersion {
		return nil, fmt.Errorf("%w: format version %d, want %d", ErrCorrupt, b[0], formatVersion)
	}
	if int(b[1]) >= len(stateCodes) || stateCodes[b[1]] == "" {
		return nil, fmt.Errorf("%w: state code %d", ErrCorrupt, b[1])
	}
	n := binary.BigEndian.Uint32(b[18:])
	if uint64(n) > uint64(len(b)-headerLen) {
		return nil, fmt.Errorf("%w: owner length %d beyond the value", ErrCorrupt, n)
	}
	return &record{
		state:      stateCodes[b[1]],
		leaseUntil: int64(binary.BigEndian.Uint64(b[2:])),
		expiresAt:  int64(binary.BigEndian.Uint64(b[10:])),
		owner:      string(b[headerLen : headerLen+int(n)]),
		payload:    append([]byte{}, b[headerLen+int(n):]...),
	}, nil
}
