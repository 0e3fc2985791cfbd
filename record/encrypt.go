package record

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"
)

// encryptedMagic starts every payload that Encrypted writes: a version, so the format can change.
var encryptedMagic = []byte("idg1")

// Encrypted returns a Store that keeps every payload (the receipt, the stored response and the
// canonical document; each part of a Payload apart) in store encrypted with AES-256-GCM (NIST SP
// 800-38D) under key, 32 bytes. Each payload gets its own 96-bit nonce (see seal), and its record
// key is the additional authenticated data, so a payload copied under another key does not
// decrypt. The state, owner token, lease and expiry stay in the clear: the store's state machine
// needs them. A payload that does not decrypt
// (another key, tampering, or written before encryption was turned on) makes the call fail with
// ErrCorrupt: records written in the clear are not readable once encryption is on.
func Encrypted(store Store, key []byte) (Store, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("record: encryption key: %d bytes, want 32 (AES-256)", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	nonceKey, err := hkdf.Key(sha256.New, key, nil, nonceKeyInfo, sha256.Size)
	if err != nil {
		return nil, err
	}
	return &encryptedStore{Store: store, aead: aead, nonceKey: nonceKey}, nil
}

// nonceKeyInfo is the HKDF info (RFC 5869) of the key that derives nonces from payloads, so that
// it is never the encryption key itself.
const nonceKeyInfo = "idemgateway record payload nonce"

type encryptedStore struct {
	Store
	aead     cipher.AEAD
	nonceKey []byte // the HMAC-SHA256 key of seal's nonces
}

// seal encrypts payload for the record at key: the magic, the nonce, and the ciphertext with its
// tag. The nonce is synthetic, as in SIV (RFC 5297): the first 96 bits of an HMAC-SHA256 (RFC 2104),
// under a key of its own, of the record key and the payload. So one call sealed twice gives the same
// bytes, which a store recognizes as the same call sent again after its answer was lost
// (docs/guarantees.md#lost-replies), while two different payloads share a nonce only as often as
// two random 96-bit nonces would. Equal ciphertexts tell an onlooker only that a record was written
// twice with the same bytes. open reads random nonces (earlier builds drew them) as well.
func (s *encryptedStore) seal(key string, payload []byte) []byte {
	mac := hmac.New(sha256.New, s.nonceKey)
	_, _ = mac.Write(binary.BigEndian.AppendUint64(nil, uint64(len(key)))) // the key's length keeps key and payload apart
	_, _ = mac.Write([]byte(key))
	_, _ = mac.Write(payload)
	out := make([]byte, len(encryptedMagic), len(encryptedMagic)+sha256.Size+len(payload)+s.aead.Overhead())
	copy(out, encryptedMagic)
	out = mac.Sum(out)[:len(encryptedMagic)+s.aead.NonceSize()]
	return s.aead.Seal(out, out[len(encryptedMagic):], payload, []byte(key))
}

func (s *encryptedStore) open(key string, payload []byte) ([]byte, error) {
	n := len(encryptedMagic) + s.aead.NonceSize()
	if len(payload) < n || !bytes.HasPrefix(payload, encryptedMagic) {
		return nil, fmt.Errorf("%w: the payload is not encrypted (written before encryption was turned on?)", ErrCorrupt)
	}
	plain, err := s.aead.Open(nil, payload[len(encryptedMagic):n], payload[n:], []byte(key))
	if err != nil {
		return nil, fmt.Errorf("%w: the payload does not decrypt with this key", ErrCorrupt)
	}
	return plain, nil
}

func (s *encryptedStore) Claim(ctx context.Context, key, owner string, payload []byte, lease, ttl time.Duration) (bool, string, Payload, error) {
	claimed, state, stored, err := s.Store.Claim(ctx, key, owner, s.seal(key, payload), lease, ttl)
	if err != nil || claimed {
		return claimed, state, Payload{Claim: payload}, err
	}
	plain, err := s.openPayload(key, stored)
	return claimed, state, plain, err
}

func (s *encryptedStore) Reclaim(ctx context.Context, key, from, owner string, payload []byte, lease, ttl time.Duration) (bool, error) {
	return s.Store.Reclaim(ctx, key, from, owner, s.seal(key, payload), lease, ttl)
}

func (s *encryptedStore) Commit(ctx context.Context, key, owner string, settle []byte, ttl time.Duration) (bool, error) {
	return s.Store.Commit(ctx, key, owner, s.seal(key, settle), ttl)
}

func (s *encryptedStore) MarkUnknown(ctx context.Context, key, owner string, settle []byte, ttl time.Duration) (bool, error) {
	return s.Store.MarkUnknown(ctx, key, owner, s.seal(key, settle), ttl)
}

func (s *encryptedStore) Get(ctx context.Context, key string) (string, Payload, error) {
	state, stored, err := s.Store.Get(ctx, key)
	if err != nil || state == "" {
		return state, stored, err
	}
	plain, err := s.openPayload(key, stored)
	return state, plain, err
}

// openPayload opens both parts of p, each sealed by seal; an empty Settle is none, and stays empty.
func (s *encryptedStore) openPayload(key string, p Payload) (Payload, error) {
	claim, err := s.open(key, p.Claim)
	if err != nil || len(p.Settle) == 0 {
		return Payload{Claim: claim}, err
	}
	settle, err := s.open(key, p.Settle)
	return Payload{Claim: claim, Settle: settle}, err
}

// WatchSettled passes on the wrapped store's settle notices (SettleNotifier); the keys are the
// same, only payloads are encrypted. A wrapped store without notices gives an error at once, so
// that its waiters poll, as they would on it unwrapped.
func (s *encryptedStore) WatchSettled(ctx context.Context, key string, settled func()) (stop func(), err error) {
	if n, ok := s.Store.(SettleNotifier); ok {
		return n.WatchSettled(ctx, key, settled)
	}
	return func() {}, fmt.Errorf("record: the encrypted store has no settle notices")
}

// Safe passes on the wrapped store's verdict (SafetyReporter); a wrapped store without one is fit
// whenever it answers, as it would be unwrapped.
func (s *encryptedStore) Safe() error {
	if r, ok := s.Store.(SafetyReporter); ok {
		return r.Safe()
	}
	return nil
}

func (s *encryptedStore) ListUnknown(ctx context.Context, prefix, cursor string, limit int) ([]string, []Payload, string, error) {
	keys, stored, next, err := s.Store.ListUnknown(ctx, prefix, cursor, limit)
	if err != nil {
		return nil, nil, "", err
	}
	for i, p := range stored {
		if stored[i], err = s.openPayload(keys[i], p); err != nil {
			return nil, nil, "", err
		}
	}
	return keys, stored, next, nil
}
