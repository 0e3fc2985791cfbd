package record_test

import (
	"testing"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/record"
)

// openPlain opens an embedded store in a directory of t's, closed when t ends: the store the
// wrappers' tests wrap, and read to see what was stored.
func openPlain(t *testing.T) record.Store {
	t.Helper()
	plain, err := boltstore.Open(t.TempDir(), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close() })
	return plain
}
