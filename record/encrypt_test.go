package record_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/record"
)

func newEncrypted(t *testing.T, key byte) (record.Store, record.Store) {
	t.Helper()
	plain := openPlain(t)
	enc, err := record.Encrypted(plain, bytes.Repeat([]byte{key}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return enc, plain
}

// TestEncryptedAtRest: what reaches the store is ciphertext bound to its key; another key, a
// moved payload and a clear payload all fail as corrupt, never as a record.
func TestEncryptedAtRest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	enc, plain := newEncrypted(t, 7)
	secret := []byte(`{"customer":"alice@example.com"}`)
	if claimed, _, _, err := enc.Claim(ctx, "k1", "o1", secret, time.Minute, time.Hour); err != nil || !claimed {
		t.Fatal(claimed, err)
	}
	if _, raw, _ := plain.Get(ctx, "k1"); bytes.Contains(raw.Claim, []byte("alice")) || !bytes.HasPrefix(raw.Claim, []byte("idg1")) {
		t.Fatalf("stored payload %q is not ciphertext", raw.Claim)
	}
	if _, got, err := enc.Get(ctx, "k1"); err != nil || !bytes.Equal(got.Claim, secret) || got.Settle != nil {
		t.Fatalf("Get = %q, %q, %v", got.Claim, got.Settle, err)
	}
	if _, _, stored, err := enc.Claim(ctx, "k1", "o2", []byte("x"), time.Minute, time.Hour); err != nil || !bytes.Equal(stored.Claim, secret) {
		t.Fatalf("second Claim = %q, %v", stored.Claim, err)
	}
	// The settle part is sealed apart, under the same key.
	receipt := []byte(`{"ticket":"alice's"}`)
	if ok, err := enc.Commit(ctx, "k1", "o1", receipt, time.Hour); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, raw, _ := plain.Get(ctx, "k1"); bytes.Contains(raw.Settle, []byte("alice")) || !bytes.HasPrefix(raw.Settle, []byte("idg1")) {
		t.Fatalf("stored settle part %q is not ciphertext", raw.Settle)
	}
	if _, got, err := enc.Get(ctx, "k1"); err != nil || !bytes.Equal(got.Claim, secret) || !bytes.Equal(got.Settle, receipt) {
		t.Fatalf("Get after Commit = %q, %q, %v", got.Claim, got.Settle, err)
	}

	other, err := record.Encrypted(plain, bytes.Repeat([]byte{8}, 32))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.Get(ctx, "k1"); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("Get with another key: %v", err)
	}
	_, raw, _ := plain.Get(ctx, "k1")
	plain.Claim(ctx, "k2", "o", raw.Claim, time.Minute, time.Hour) // the ciphertext moved under another key
	if _, _, err := enc.Get(ctx, "k2"); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("Get of a moved payload: %v", err)
	}
	plain.Claim(ctx, "k3", "o", []byte(`{"clear":true}`), time.Minute, time.Hour)
	if _, _, _, err := enc.Claim(ctx, "k3", "o", []byte("x"), time.Minute, time.Hour); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("Claim over a clear payload: %v", err)
	}
	if _, err := record.Encrypted(plain, []byte("short")); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
}

// TestEncryptedSealsACallTwiceAlike: the same payload sealed twice for the same record gives the
// same bytes (a synthetic nonce), so that a store recognizes a call sent again after its answer was
// lost (docs/guarantees.md#lost-replies); another payload or another record gets another nonce. A
// payload sealed with a random nonce, as earlier builds did, still opens.
func TestEncryptedSealsACallTwiceAlike(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	enc, plain := newEncrypted(t, 7)
	sealed := func(key string, payload []byte) []byte {
		t.Helper()
		if _, err := plain.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		if claimed, _, _, err := enc.Claim(ctx, key, "o", payload, time.Minute, time.Hour); !claimed || err != nil {
			t.Fatal(claimed, err)
		}
		_, raw, err := plain.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return raw.Claim
	}
	first := sealed("k", []byte("payload"))
	if again := sealed("k", []byte("payload")); !bytes.Equal(again, first) {
		t.Errorf("the same payload sealed twice: %x and %x", first, again)
	}
	nonce := func(b []byte) []byte { return b[4:16] }
	if other := sealed("k", []byte("payloae")); bytes.Equal(nonce(other), nonce(first)) {
		t.Errorf("another payload got the same nonce %x", nonce(first))
	}
	if other := sealed("k2", []byte("payload")); bytes.Equal(nonce(other), nonce(first)) {
		t.Errorf("another record got the same nonce %x", nonce(first))
	}
	// The record key and the payload are kept apart in the nonce's input.
	if a, b := sealed("ab", []byte("c")), sealed("a", []byte("bc")); bytes.Equal(nonce(a), nonce(b)) {
		t.Errorf("key ab, payload c and key a, payload bc share the nonce %x", nonce(a))
	}

	block, err := aes.NewCipher(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	random := append([]byte("idg1"), make([]byte, aead.NonceSize())...)
	_, _ = rand.Read(random[4:])
	random = aead.Seal(random, random[4:], []byte("sealed by an earlier build"), []byte("old"))
	if claimed, _, _, err := plain.Claim(ctx, "old", "o", random, time.Minute, time.Hour); !claimed || err != nil {
		t.Fatal(claimed, err)
	}
	if _, got, err := enc.Get(ctx, "old"); err != nil || string(got.Claim) != "sealed by an earlier build" {
		t.Errorf("Get of a payload with a random nonce = %q, %v", got.Claim, err)
	}
}
