package record

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
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
	return coded(store, &encryption{aead: aead, nonceKey: nonceKey}), nil
}

// nonceKeyInfo is the HKDF info (RFC 5869) of the key that derives nonces from payloads, so that
// it is never the encryption key itself.
const nonceKeyInfo = "idemgateway record payload nonce"

// encryption is the payloadCodec of Encrypted.
type encryption struct {
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
func (s *encryption) seal(key string, payload []byte) []byte {
	mac := hmac.New(sha256.New, s.nonceKey)
	_, _ = mac.Write(binary.BigEndian.AppendUint64(nil, uint64(len(key)))) // the key's length keeps key and payload apart
	_, _ = mac.Write([]byte(key))
	_, _ = mac.Write(payload)
	out := make([]byte, len(encryptedMagic), len(encryptedMagic)+sha256.Size+len(payload)+s.aead.Overhead())
	copy(out, encryptedMagic)
	out = mac.Sum(out)[:len(encryptedMagic)+s.aead.NonceSize()]
	return s.aead.Seal(out, out[len(encryptedMagic):], payload, []byte(key))
}

func (s *encryption) open(key string, payload []byte) ([]byte, error) {
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
