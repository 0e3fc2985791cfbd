package gateway

import (
	"net/http"
	"testing"
)

func TestStoredHeader(t *testing.T) {
	t.Parallel()
	h := http.Header{
		"Content-Type":          {"application/json"},
		"Content-Encoding":      {"br"}, // sent unasked: the body is stored as it came
		"Location":              {"/v1/tickets/T-1"},
		"Etag":                  {`"v1"`},
		"X-Custom":              {"listed by the route"},
		"X-Unlisted":            {"not on the allow-list"},
		"Vary":                  {"Accept"},
		"Link":                  {"named in Connection"},
		"Connection":            {"Link"},
		"Set-Cookie":            {"session=secret"},
		"Authorization":         {"Bearer secret"},
		"Www-Authenticate":      {"Bearer"},
		"Proxy-Authenticate":    {"Basic"},
		"Date":                  {"Mon, 30 Nov 2026 00:00:00 GMT"},
		"Content-Length":        {"42"},
		"Transfer-Encoding":     {"chunked"},
		"Keep-Alive":            {"timeout=5"},
		"Ratelimit-Remaining":   {"9"},
		"X-Ratelimit-Remaining": {"9"},
		"X-Rate-Limit-Limit":    {"10"},
		"Retry-After":           {"1"},
		"Idempotency-Decision":  {"execute"},
	}
	// The routes file refuses Set-Cookie and the rate-limit headers in receipt.replay_headers; this
	// holds anyway.
	got := storedHeader(h, []string{"X-Custom", "Set-Cookie", "Ratelimit-Remaining", "X-Ratelimit-Remaining", "X-Rate-Limit-Limit"})
	want := []string{"Content-Type", "Content-Encoding", "Location", "Etag", "Vary", "X-Custom"}
	if len(got) != len(want) {
		t.Fatalf("storedHeader kept %v, want only %v", got, want)
	}
	for _, name := range want {
		if got.Get(name) != h.Get(name) {
			t.Errorf("%s = %q, want %q", name, got.Get(name), h.Get(name))
		}
	}
}
