package boltstore_test

import (
	"context"
	"testing"

	"github.com/idemgateway/idemgateway/boltstore"
)

var ctx = context.Background()

// open opens a store in dir and closes it when the test ends.
func open(t *testing.T, dir string, opts boltstore.Options) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
