package gateway_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/testlog"
)

// TestTenantAndCredentialScope: tenant_required refuses a request without a tenant; with
// scope.credential two callers of one tenant never share a key, and the credential itself is
// kept nowhere: not in the log, the receipt, the span or the upstream's key.
func TestTenantAndCredentialScope(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		up, executions := countingUpstream(t)
		logs := &testlog.Buffer{}
		spans := tracetest.NewInMemoryExporter()
		reg := gateway.NewRegistry()
		srv, _, gw := newGatewayYAML(t, open, fmt.Sprintf(`
upstreams:
  up: {url: %s, headers: {X-Upstream-Token: "upstream-s3cret"}}
routes:
  - {name: create, upstream: up, method: POST, path: /v1/tickets, class: non_idempotent,
     tenant_required: true, scope: {credential: true}, receipt: {remote_id: /id}}
`, up.URL), gateway.Options{
			Logger:         slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)),
			Metrics:        reg,
		})
		send := func(tenant, credential, key, body string) answer {
			h := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {key}}
			if tenant != "" {
				h.Set("X-Tenant-ID", tenant)
			}
			if credential != "" {
				h.Set("Authorization", "Bearer "+credential)
			}
			return do(t, "POST", srv.URL+"/v1/tickets", h, body)
		}
		if a := send("", "alice-s3cret", "k", `{}`); a.status != 400 || !strings.HasSuffix(fmt.Sprint(a.problem["type"]), ":missing-tenant") {
			t.Fatalf("no tenant: %d %v", a.status, a.problem)
		}
		if a := send("acme", "", "k", `{}`); a.status != 400 || !strings.HasSuffix(fmt.Sprint(a.problem["type"]), ":invalid-request") {
			t.Fatalf("no credential: %d %v", a.status, a.problem)
		}
		if a := send("acme", "alice-s3cret", "k", `{}`); a.header.Get("Idempotency-Decision") != "execute" {
			t.Fatalf("alice: %d %s", a.status, a.header.Get("Idempotency-Decision"))
		}
		if a := send("acme", "bob-s3cret", "k", `{}`); a.header.Get("Idempotency-Decision") != "execute" {
			t.Fatalf("bob, same tenant and key: %s; want execute (his own scope)", a.header.Get("Idempotency-Decision"))
		}
		if a := send("acme", "alice-s3cret", "k", `{}`); a.header.Get("Idempotency-Decision") != "replay" {
			t.Fatalf("alice again: %s", a.header.Get("Idempotency-Decision"))
		}
		// Audit F12: another spelling of alice's credential is alice's scope; two credentials are
		// refused, since the upstream might check the one the scope did not hash.
		h := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"k"}, "X-Tenant-Id": {"acme"}}
		h.Set("Authorization", "bearer   alice-s3cret")
		if a := do(t, "POST", srv.URL+"/v1/tickets", h, `{}`); a.header.Get("Idempotency-Decision") != "replay" {
			t.Fatalf("alice, scheme in lower case and three spaces: %d %s; want her replay", a.status, a.header.Get("Idempotency-Decision"))
		}
		h["Authorization"] = []string{"Bearer bob-s3cret", "Bearer alice-s3cret"}
		if a := do(t, "POST", srv.URL+"/v1/tickets", h, `{}`); a.status != 400 || !strings.HasSuffix(fmt.Sprint(a.problem["type"]), ":invalid-request") {
			t.Fatalf("two credentials: %d %v; want 400 invalid-request", a.status, a.problem)
		}
		if n := executions.Load(); n != 2 {
			t.Fatalf("executions = %d, want 2", n)
		}

		// A new key per retry of one effect is counted.
		send("acme", "alice-s3cret", "k-again", `{}`)
		want := `
# HELP idemgateway_key_churn_total Executions of an effect (tenant, tool, fingerprint) that executed under another key within a minute: a client minting a new key per retry (counted per gateway process).
# TYPE idemgateway_key_churn_total counter
idemgateway_key_churn_total{tool="create"} 1
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "idemgateway_key_churn_total"); err != nil {
			t.Error(err)
		}

		// The credential and the upstream secret are nowhere.
		sum := sha256.Sum256([]byte("Bearer alice-s3cret"))
		scope := "sha256:" + hex.EncodeToString(sum[:16])
		code, rec := adminDo(t, gw.AdminHandler(""), "GET", "/v1/records/acme/create/k?credential="+url.QueryEscape(scope), "", "")
		var everything strings.Builder
		fmt.Fprint(&everything, logs.String(), rec, code)
		for _, s := range spans.GetSpans() {
			fmt.Fprint(&everything, s.Name, s.Attributes, s.Events)
		}
		for _, secret := range []string{"alice-s3cret", "bob-s3cret", "upstream-s3cret"} {
			if strings.Contains(everything.String(), secret) {
				t.Errorf("%q leaked into the logs, a receipt or a span", secret)
			}
		}
		if code != 200 || rec["credential_scope"] != scope || rec["remote_id"] != "T-1" {
			t.Errorf("credential-scoped receipt: %d %v", code, rec)
		}
	})
}
