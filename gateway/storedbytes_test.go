package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/fixtures"
	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/record"
)

// TestStoredBytes (docs/performance.md#stored-bytes): what one executed key costs Redis
// (MEMORY USAGE of every key it holds), through the gateway and the store the idemgateway command
// opens (record.Compressed), for JSON shaped as a help desk's (internal/fixtures): a ticket
// created (a 1.2 KiB request, the ticket answered), and ticket lists of 16 KiB and 256 KiB
// answered to a small request. At the default threshold (4 KiB), a 256 KiB list takes at most
// 30 % of its size and a 16 KiB one half; compressing from 1 KiB brings the created ticket's key
// to at most 2 700 bytes. Byte counts of one Redis build, not timings: a run differs from another
// by a few bytes (the times a record holds), within the allocator's size classes.
func TestStoredBytes(t *testing.T) {
	t.Parallel()
	var list struct{ Tickets []json.RawMessage }
	if err := json.Unmarshal(fixtures.Tickets16K, &list); err != nil {
		t.Fatal(err)
	}
	ticket := []byte(list.Tickets[0])
	answers := map[string][]byte{"ticket": ticket, "16KiB": fixtures.Tickets16K, "256KiB": fixtures.Tickets256K}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer := answers[r.Header.Get(resultBytes)]
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(answer)
	}))
	t.Cleanup(up.Close)
	for _, c := range []struct {
		answer   string
		request  []byte
		minBytes int // the compression threshold
		most     int // bytes, at most
	}{
		{"ticket", ticket, record.DefaultCompressMinBytes, 0},
		{"ticket", ticket, 1 << 10, 2700},
		{"16KiB", []byte(`{"status":"open"}`), record.DefaultCompressMinBytes, len(fixtures.Tickets16K) / 2},
		{"256KiB", []byte(`{"status":"open"}`), record.DefaultCompressMinBytes, len(fixtures.Tickets256K) * 30 / 100},
	} {
		t.Run(fmt.Sprintf("%s/%d", c.answer, c.minBytes), func(t *testing.T) {
			t.Parallel()
			usage := map[int]int64{}
			for _, minBytes := range []int{c.minBytes, 0} {
				store, srv := openRedisServer(t, redistest.Options{})
				gw, _, _ := newGatewayOn(t, record.Compressed(store, minBytes), ticketsYAML(up.URL), gateway.Options{})
				req, err := http.NewRequest(http.MethodPost, gw.URL+"/v1/tickets", bytes.NewReader(c.request))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", "k1")
				req.Header.Set(resultBytes, c.answer)
				if r, err := roundTrip(req); err != nil || r.status != http.StatusCreated || r.body != string(answers[c.answer]) {
					t.Fatalf("%d, %d bytes, %v; want 201 and the answer", r.status, len(r.body), err)
				}
				raw := rawRedis(t, srv)
				ctx := context.Background()
				keys, err := raw.Keys(ctx, "*").Result()
				if err != nil || len(keys) == 0 {
					t.Fatalf("KEYS: %q, %v", keys, err)
				}
				for _, k := range keys {
					n, err := raw.MemoryUsage(ctx, k, 0).Result()
					if err != nil {
						t.Fatal(err)
					}
					usage[minBytes] += n
				}
			}
			t.Logf("a %d-byte request answered %d bytes: %d bytes in Redis compressed from %d bytes, %d uncompressed",
				len(c.request), len(answers[c.answer]), usage[c.minBytes], c.minBytes, usage[0])
			if got := usage[c.minBytes]; c.most > 0 && got > int64(c.most) {
				t.Errorf("%d bytes in Redis, want at most %d", got, c.most)
			}
		})
	}
}
