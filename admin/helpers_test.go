package admin_test

import (
	"testing"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/record"
)

// openEmbedded opens an embedded store in a directory of the test's, closed when it ends.
func openEmbedded(t *testing.T) record.Store {
	t.Helper()
	s, err := boltstore.Open(t.TempDir(), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
