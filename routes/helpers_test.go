package routes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgateway/idemgateway/canonical"
)

// testEnv is the environment of the tests; its values must never show in an error or a print.
var testEnv = map[string]string{
	"TICKETS_TOKEN": "s3cr3t-tickets-token",
	"CLIENT_ID":     "s3cr3t-client-id",
	"NEWLINE_VALUE": "s3cr3t\r\nX-Injected: 1",
}

// secretValues are every credential the test files hold, in the environment or inline.
var secretValues = []string{"s3cr3t", "hunter2", "pa55"}

// lookupTestEnv looks name up in testEnv, as os.LookupEnv does in the environment.
func lookupTestEnv(name string) (string, bool) {
	v, ok := testEnv[name]
	return v, ok
}

// parseFile parses a file of testdata with testEnv.
func parseFile(t *testing.T, name string) (*Config, error) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return Parse(name, data, lookupTestEnv)
}

// assertNoSecret fails when s holds a credential of the test files.
func assertNoSecret(t *testing.T, s string) {
	t.Helper()
	for _, secret := range secretValues {
		if strings.Contains(s, secret) {
			t.Errorf("%q leaks %q", s, secret)
		}
	}
}

// mustPointer parses a JSON Pointer that a test knows to be valid.
func mustPointer(t *testing.T, s string) canonical.Pointer {
	t.Helper()
	p, err := canonical.ParsePointer(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
