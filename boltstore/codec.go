package boltstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/idemgateway/idemgateway/record"
)

// formatVersion is the first byte of every value encode writes. decode also reads values of
// version 1, written before the payload was split, as records with no settle part.
const formatVersion = 2

// Lengths of the fixed part of an encoded value: of version 1, and of version 2, which adds the
// length of the claim part.
const (
	headerLenV1 = 1 + 1 + 8 + 8 + 4
	headerLen   = headerLenV1 + 4
)

// entry is one record as the records bucket holds it. Times are Unix milliseconds of the local
// clock.
type entry struct {
	state      string // one of the record.State constants
	owner      string
	leaseUntil int64 // end of the owner's lease
	expiresAt  int64 // the record is absent from this instant on
	claim      []byte
	settle     []byte // empty until a Commit or MarkUnknown
}

// newEntry is the record a Claim creates, or a Reclaim takes over into, at now: in_progress,
// owned by owner for lease, holding payload as its claim part and no settle part, expiring after
// ttl.
func newEntry(owner string, payload []byte, now int64, lease, ttl time.Duration) *entry {
	return &entry{
		state:      record.StateInProgress,
		owner:      owner,
		leaseUntil: now + record.Millis(lease),
		expiresAt:  now + record.Millis(ttl),
		claim:      payload,
	}
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

// lapsedUnder reports whether r is outcome_unknown because a Claim found the lease of owner lapsed
// (it has no settle part), owner still holding it: nobody took it over. That owner may still
// settle it (record.Store.Commit, MarkUnknown, Release).
func (r *entry) lapsedUnder(owner string) bool {
	return r.state == record.StateUnknown && r.owner == owner && len(r.settle) == 0
}

// claimedBy reports whether r is in_progress, owned by owner, and holds payload as its claim
// part: the record that a Claim or Reclaim of owner and payload made.
func (r *entry) claimedBy(owner string, payload []byte) bool {
	return r.ownedInProgress(owner) && bytes.Equal(r.claim, payload)
}

// payload returns r's payload as Get hands it out.
func (r *entry) payload() record.Payload {
	return record.Payload{Claim: r.claim, Settle: r.settle}
}

// claimAnswer returns r's payload as Claim hands it out: of a settled record, the settle part
// alone (record.Store.Claim).
func (r *entry) claimAnswer() record.Payload {
	if len(r.settle) > 0 {
		return record.Payload{Settle: r.settle}
	}
	return r.payload()
}

// stateCodes maps states to their byte in the encoding; the index is the code.
var stateCodes = [...]string{1: record.StateInProgress, 2: record.StateCommitted, 3: record.StateUnknown}

// encode returns the version 2 encoding of r, laid out as the package comment describes.
func (r *entry) encode() []byte {
	code := 0
	for c, s := range stateCodes {
		if s == r.state && s != "" {
			code = c
		}
	}
	b := make([]byte, headerLen, headerLen+len(r.owner)+len(r.claim)+len(r.settle))
	b[0] = formatVersion
	b[1] = byte(code)
	binary.BigEndian.PutUint64(b[2:], uint64(r.leaseUntil))
	binary.BigEndian.PutUint64(b[10:], uint64(r.expiresAt))
	binary.BigEndian.PutUint32(b[18:], uint32(len(r.owner)))
	binary.BigEndian.PutUint32(b[22:], uint32(len(r.claim)))
	b = append(b, r.owner...)
	b = append(b, r.claim...)
	return append(b, r.settle...)
}

// decode parses an encoding made by encode, or a version 1 value (whose payload is the claim part,
// with no settle part). It copies everything out of b, which bbolt owns only for the length of a
// transaction.
func decode(b []byte) (*entry, error) { return decodeEntry(b, true) }

// decodeAnswer is decode for what a Claim answers (claimAnswer): of a settled record it leaves the
// claim part out, neither copied nor kept, so that a replay does not copy the document. Such an
// entry is to be answered from, never written back.
func decodeAnswer(b []byte) (*entry, error) { return decodeEntry(b, false) }

// decodeEntry is decode, leaving a settled record's claim part out unless withClaim.
func decodeEntry(b []byte, withClaim bool) (*entry, error) {
	if len(b) < headerLenV1 {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the header", record.ErrCorrupt, len(b))
	}
	head := headerLen
	switch b[0] {
	case 1:
		head = headerLenV1
	case formatVersion:
		if len(b) < headerLen {
			return nil, fmt.Errorf("%w: %d bytes, shorter than the header", record.ErrCorrupt, len(b))
		}
	default:
		return nil, fmt.Errorf("%w: format version %d, want 1 or %d", record.ErrCorrupt, b[0], formatVersion)
	}
	if int(b[1]) >= len(stateCodes) || stateCodes[b[1]] == "" {
		return nil, fmt.Errorf("%w: state code %d", record.ErrCorrupt, b[1])
	}
	n := uint64(binary.BigEndian.Uint32(b[18:]))
	if n > uint64(len(b)-head) {
		return nil, fmt.Errorf("%w: owner length %d beyond the value", record.ErrCorrupt, n)
	}
	rest := b[head+int(n):]
	claimLen := uint64(len(rest)) // version 1: the whole payload is the claim part
	if head == headerLen {
		m := uint64(binary.BigEndian.Uint32(b[22:]))
		if m > claimLen {
			return nil, fmt.Errorf("%w: claim length %d beyond the value", record.ErrCorrupt, m)
		}
		claimLen = m
	}
	r := &entry{
		state:      stateCodes[b[1]],
		leaseUntil: int64(binary.BigEndian.Uint64(b[2:])),
		expiresAt:  int64(binary.BigEndian.Uint64(b[10:])),
		owner:      string(b[head : head+int(n)]),
	}
	settled := uint64(len(rest)) > claimLen
	if withClaim || !settled {
		r.claim = append([]byte{}, rest[:claimLen]...)
	}
	if settled {
		r.settle = append([]byte{}, rest[claimLen:]...)
	}
	return r, nil
}
