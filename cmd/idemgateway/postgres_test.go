package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/idemgateway/idemgateway/internal/pgtest"
)

// TestPostgresWarnsWithoutSynchronousCommit: opening the PostgreSQL store warns when the
// session's synchronous_commit is off (an acknowledged receipt could be lost in a crash), and
// says nothing under the default, on.
func TestPostgresWarnsWithoutSynchronousCommit(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	for _, tc := range []struct {
		query string
		warn  bool
	}{
		{"", false},
		{"&options=-c%20synchronous_commit%3Doff", true},
	} {
		var logs bytes.Buffer
		s := &settings{PostgresURL: srv.URL() + tc.query, PostgresSchema: "warn"}
		st, closeStore, err := s.openStore(slog.New(slog.NewJSONHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Ping(t.Context()); err != nil {
			t.Errorf("Ping: %v", err)
		}
		closeStore()
		if got := strings.Contains(logs.String(), "synchronous_commit is off"); got != tc.warn {
			t.Errorf("URL%s: warned %v, want %v; log:\n%s", tc.query, got, tc.warn, logs.String())
		}
	}
}
