package record_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/record"
)

// unsafeStore is a store whose safety check reports err.
type unsafeStore struct {
	record.Store
	err error
}

func (s unsafeStore) Safe() error { return s.err }

// TestEncryptedPassesSafety: encryption at rest does not hide the wrapped store's verdict from the
// gateway (docs/cases.md C15), and a store without one stays fit.
func TestEncryptedPassesSafety(t *testing.T) {
	t.Parallel()
	plain, err := boltstore.Open(t.TempDir(), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close() })
	key := bytes.Repeat([]byte{7}, 32)
	evicting := errors.New("maxmemory-policy is allkeys-lru")
	for _, tc := range []struct {
		name  string
		store record.Store
		want  error
	}{
		{"unsafe", unsafeStore{plain, evicting}, evicting},
		{"safe", unsafeStore{plain, nil}, nil},
		{"no reporter", plain, nil},
	} {
		enc, err := record.Encrypted(tc.store, key)
		if err != nil {
			t.Fatal(err)
		}
		r, ok := enc.(record.SafetyReporter)
		if !ok {
			t.Fatalf("%s: the encrypted store is no SafetyReporter", tc.name)
		}
		if got := r.Safe(); got != tc.want {
			t.Errorf("%s: Safe() = %v, want %v", tc.name, got, tc.want)
		}
	}
}
