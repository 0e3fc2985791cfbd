package gateway_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/testlog"
)

// authRoutes is a routes file with clients (a format string: the upstream's URL, then the
// clients section) and a route of each kind: keyed, keyless and read_only.
const authRoutes = `
upstreams:
  up: {url: %s}
clients:
%s
routes:
  - {name: create, upstream: up, method: POST, path: /v1/tickets, class: non_idempotent, receipt: {remote_id: /id}}
  - {name: put, upstream: up, method: PUT, path: "/v1/tickets/{id}", class: idempotent}
  - {name: read, upstream: up, method: GET, path: "/v1/tickets/{id}", class: read_only}
`

// TestWhoIsCallingAPIKeys: with API key clients, every route (keyed, keyless, read_only)
// refuses a request without a key the file knows (401, with a challenge per credential header),
// the tenant and actor are the client's (a header that says otherwise gets 403), and a
// credential header sent twice is a 400. The key itself reaches no log and no receipt.
func TestWhoIsCallingAPIKeys(t *testing.T) {
	t.Parallel()
	up, executions := countingUpstream(t)
	logs := &testlog.Buffer{}
	srv, _, gw := newGatewayYAML(t, openEmbedded, fmt.Sprintf(authRoutes, up.URL, `
  api_keys:
    - {name: agent-a, key: "`+keyHash("alpha-s3cret")+`", tenant: acme}
    - {name: agent-b, key: "`+keyHash("bravo-s3cret")+`", header: X-Api-Key, tenant: acme, actor: bravo}
    - {name: agent-g, key: "`+keyHash("golf-s3cret")+`", tenant: globex}`),
		gateway.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	t.Cleanup(func() { _ = gw.Close() })
	const (
		bearerChallenge  = `Bearer realm="idemgateway"`
		invalidChallenge = `Bearer realm="idemgateway", error="invalid_token"`
		apiKeyChallenge  = `ApiKey realm="idemgateway", header="X-Api-Key"`
	)
	h := func(kv ...string) http.Header {
		h := http.Header{"Content-Type": {"application/json"}}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1])
		}
		return h
	}
	n := 0
	key := func() string { n++; return fmt.Sprintf("k-%d", n) }
	tests := []struct {
		name, method, path string
		header             http.Header
		status             int
		problem            string   // type name, or ""
		challenges         []string // WWW-Authenticate, on a 401
		tenant, actor      string   // of the receipt, on a keyed 201
	}{
		{"right key", "POST", "/v1/tickets", h("Authorization", "Bearer alpha-s3cret", "Idempotency-Key", key()), 201, "", nil, "acme", ""},
		{"scheme in lower case", "POST", "/v1/tickets", h("Authorization", "bearer alpha-s3cret", "Idempotency-Key", key()), 201, "", nil, "acme", ""},
		{"the tenant header agrees", "POST", "/v1/tickets", h("Authorization", "Bearer alpha-s3cret", "X-Tenant-Id", "acme", "Idempotency-Key", key()), 201, "", nil, "acme", ""},
		{"an unbound actor is the header's", "POST", "/v1/tickets", h("Authorization", "Bearer golf-s3cret", "X-Actor-Id", "worker-3", "Idempotency-Key", key()), 201, "", nil, "globex", "worker-3"},
		{"key in its own header, actor bound", "POST", "/v1/tickets", h("X-Api-Key", "bravo-s3cret", "Idempotency-Key", key()), 201, "", nil, "acme", "bravo"},
		{"wrong key", "POST", "/v1/tickets", h("Authorization", "Bearer alpha-s3cret-not", "Idempotency-Key", key()), 401, "unauthenticated", []string{invalidChallenge, apiKeyChallenge}, "", ""},
		{"another client's header", "POST", "/v1/tickets", h("X-Api-Key", "alpha-s3cret", "Idempotency-Key", key()), 401, "unauthenticated", []string{invalidChallenge, apiKeyChallenge}, "", ""},
		{"not Bearer", "POST", "/v1/tickets", h("Authorization", "Basic alpha-s3cret", "Idempotency-Key", key()), 401, "unauthenticated", []string{invalidChallenge, apiKeyChallenge}, "", ""},
		{"missing", "POST", "/v1/tickets", h("Idempotency-Key", key()), 401, "unauthenticated", []string{bearerChallenge, apiKeyChallenge}, "", ""},
		{"missing, tenant header set", "POST", "/v1/tickets", h("X-Tenant-Id", "acme", "Idempotency-Key", key()), 401, "unauthenticated", []string{bearerChallenge, apiKeyChallenge}, "", ""},
		{"tenant header disagrees", "POST", "/v1/tickets", h("Authorization", "Bearer alpha-s3cret", "X-Tenant-Id", "globex", "Idempotency-Key", key()), 403, "tenant-mismatch", nil, "", ""},
		{"actor header disagrees", "POST", "/v1/tickets", h("X-Api-Key", "bravo-s3cret", "X-Actor-Id", "alpha", "Idempotency-Key", key()), 403, "actor-mismatch", nil, "", ""},
		{"credential sent twice", "POST", "/v1/tickets", h("Authorization", "Bearer alpha-s3cret", "Authorization", "Bearer golf-s3cret", "Idempotency-Key", key()), 400, "invalid-request", nil, "", ""},
		{"keyless, missing", "PUT", "/v1/tickets/1", h(), 401, "unauthenticated", []string{bearerChallenge, apiKeyChallenge}, "", ""},
		{"keyless, right key", "PUT", "/v1/tickets/1", h("X-Api-Key", "bravo-s3cret"), 201, "", nil, "", ""},
		{"read, missing", "GET", "/v1/tickets/1", nil, 401, "unauthenticated", []string{bearerChallenge, apiKeyChallenge}, "", ""},
		{"read, wrong key", "GET", "/v1/tickets/1", h("Authorization", "Bearer nope"), 401, "unauthenticated", []string{invalidChallenge, apiKeyChallenge}, "", ""},
		{"read, tenant header disagrees", "GET", "/v1/tickets/1", h("Authorization", "Bearer alpha-s3cret", "X-Tenant-Id", "globex"), 403, "tenant-mismatch", nil, "", ""},
		{"read, right key", "GET", "/v1/tickets/1", h("Authorization", "Bearer alpha-s3cret"), 201, "", nil, "", ""},
	}
	for _, tt := range tests {
		before := executions.Load()
		a := do(t, tt.method, srv.URL+tt.path, tt.header, `{}`)
		executed := executions.Load() > before
		if a.status != tt.status || problemType(a) != tt.problem || executed != (tt.status < 300) {
			t.Errorf("%s: %d %s, executed %v; want %d %s", tt.name, a.status, problemType(a), executed, tt.status, tt.problem)
		}
		if got := a.header.Values("Www-Authenticate"); strings.Join(got, "|") != strings.Join(tt.challenges, "|") {
			t.Errorf("%s: WWW-Authenticate %q, want %q", tt.name, got, tt.challenges)
		}
		if tt.tenant == "" {
			continue
		}
		code, rec := adminDo(t, gw.AdminHandler(""), "GET", "/v1/records/"+tt.tenant+"/create/"+tt.header.Get("Idempotency-Key"), "", "")
		if actor, _ := rec["actor"].(string); code != 200 || actor != tt.actor {
			t.Errorf("%s: the receipt under tenant %s: %d %v; want actor %q", tt.name, tt.tenant, code, rec, tt.actor)
		}
	}
	if !strings.Contains(logs.String(), `"tenant":"acme","client":"agent-a"`) {
		t.Errorf("no access line names the client:\n%s", logs.String())
	}
	for _, secret := range []string{"alpha-s3cret", "bravo-s3cret", "golf-s3cret"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("%s is in the logs", secret)
		}
	}
}

// jwtIssuer signs tokens with an Ed25519 key (EdDSA, RFC 8037) and publishes its key set.
type jwtIssuer struct {
	kid string
	key ed25519.PrivateKey
}

func newJWTIssuer(t *testing.T, kid string) *jwtIssuer {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &jwtIssuer{kid: kid, key: key}
}

// jwks is the key set (RFC 7517 §5) of the issuers' public keys.
func jwks(issuers ...*jwtIssuer) []byte {
	type jwk struct {
		Kty string `json:"kty"`
		Crv string `json:"crv"`
		Kid string `json:"kid"`
		Alg string `json:"alg"`
		Use string `json:"use"`
		X   string `json:"x"`
	}
	var set struct {
		Keys []jwk `json:"keys"`
	}
	for _, i := range issuers {
		set.Keys = append(set.Keys, jwk{Kty: "OKP", Crv: "Ed25519", Kid: i.kid, Alg: "EdDSA", Use: "sig",
			X: base64.RawURLEncoding.EncodeToString(i.key.Public().(ed25519.PublicKey))})
	}
	b, _ := json.Marshal(set)
	return b
}

// token signs claims, with the issuer's key id.
func (i *jwtIssuer) token(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	tok.Header["kid"] = i.kid
	s, err := tok.SignedString(i.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestWhoIsCallingJWT: JWT clients verify a token against a key set from a file and from a
// URL (fetched again when a token names a key it lacks: a rotation): issuer, audience, expiry,
// signature, algorithm, and the tenant and actor claims, which a header may repeat but not
// contradict.
func TestWhoIsCallingJWT(t *testing.T) {
	t.Parallel()
	fileKeys, urlKeys, rotated, stranger := newJWTIssuer(t, "f1"), newJWTIssuer(t, "u1"), newJWTIssuer(t, "u2"), newJWTIssuer(t, "f1")
	var published atomic.Pointer[[]byte]
	set := jwks(urlKeys)
	published.Store(&set)
	var fetches atomic.Int32
	keyServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(*published.Load())
	}))
	t.Cleanup(keyServer.Close)
	jwksFile := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwksFile, jwks(fileKeys), 0o600); err != nil {
		t.Fatal(err)
	}
	up, executions := countingUpstream(t)
	srv, _, gw := newGatewayYAML(t, openEmbedded, fmt.Sprintf(authRoutes, up.URL, `
  jwt:
    - {name: file-sso, jwks_file: "`+jwksFile+`", issuer: "https://file.example/", audience: idemgateway, tenant_claim: org}
    - {name: url-sso, jwks_url: "`+keyServer.URL+`/jwks.json", issuer: "https://url.example/", audience: idemgateway,
       tenant_claim: org, actor_claim: sub, algorithms: [EdDSA]}`), gateway.Options{})
	t.Cleanup(func() { _ = gw.Close() })

	now := time.Now()
	claims := func(iss string, change ...func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"iss": iss, "aud": "idemgateway", "sub": "user-1", "org": "acme", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
		for _, f := range change {
			f(c)
		}
		return c
	}
	set1 := func(k string, v any) func(jwt.MapClaims) { return func(c jwt.MapClaims) { c[k] = v } }
	drop := func(k string) func(jwt.MapClaims) { return func(c jwt.MapClaims) { delete(c, k) } }
	const fileIss, urlIss = "https://file.example/", "https://url.example/"
	unsigned := func(c jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodNone, c).SignedString(jwt.UnsafeAllowNoneSignatureType)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	hmac := func(c jwt.MapClaims) string { // keyed with the public key, the old algorithm-confusion trick
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, c)
		tok.Header["kid"] = "f1"
		s, err := tok.SignedString([]byte(fileKeys.key.Public().(ed25519.PublicKey)))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	// The issuer rotates its key: a token signed with a key the set lacks makes the gateway fetch
	// the set again, once (at most once a minute: first, before a case below spends it).
	published.Store(new(jwks(urlKeys, rotated)))
	before := fetches.Load()
	h := http.Header{"Authorization": {"Bearer " + rotated.token(t, claims(urlIss))}}
	if a := do(t, "GET", srv.URL+"/v1/tickets/1", h, ""); a.status != 201 || fetches.Load() != before+1 {
		t.Errorf("a token of the rotated key: %d %v, %d fetches; want 201 after one fetch", a.status, a.problem, fetches.Load()-before)
	}

	tests := []struct {
		name, token, tenantHeader, actorHeader string
		status                                 int
		problem                                string
	}{
		{"valid, key set from a file", fileKeys.token(t, claims(fileIss)), "", "", 201, ""},
		{"valid, key set from a URL", urlKeys.token(t, claims(urlIss)), "", "", 201, ""},
		{"the tenant header agrees", fileKeys.token(t, claims(fileIss)), "acme", "", 201, ""},
		{"the tenant claim disagrees with the header", fileKeys.token(t, claims(fileIss)), "globex", "", 403, "tenant-mismatch"},
		{"the actor claim disagrees with the header", urlKeys.token(t, claims(urlIss)), "", "user-2", 403, "actor-mismatch"},
		{"expired", fileKeys.token(t, claims(fileIss, set1("exp", now.Add(-time.Hour).Unix()))), "", "", 401, "unauthenticated"},
		{"no expiry", fileKeys.token(t, claims(fileIss, drop("exp"))), "", "", 401, "unauthenticated"},
		{"not yet valid", fileKeys.token(t, claims(fileIss, set1("nbf", now.Add(time.Hour).Unix()))), "", "", 401, "unauthenticated"},
		{"wrong issuer", fileKeys.token(t, claims("https://evil.example/")), "", "", 401, "unauthenticated"},
		{"another client's issuer", fileKeys.token(t, claims(urlIss)), "", "", 401, "unauthenticated"},
		{"wrong audience", fileKeys.token(t, claims(fileIss, set1("aud", "someone-else"))), "", "", 401, "unauthenticated"},
		{"bad signature (another key, same kid)", stranger.token(t, claims(fileIss)), "", "", 401, "unauthenticated"},
		{"alg none", unsigned(claims(fileIss)), "", "", 401, "unauthenticated"},
		{"HS256 keyed with the public key", hmac(claims(fileIss)), "", "", 401, "unauthenticated"},
		{"no tenant claim", fileKeys.token(t, claims(fileIss, drop("org"))), "", "", 401, "unauthenticated"},
		{"a tenant claim that is no tenant", fileKeys.token(t, claims(fileIss, set1("org", "acme/eu"))), "", "", 400, "invalid-request"},
		{"no subject", fileKeys.token(t, claims(fileIss, drop("sub"))), "", "", 401, "unauthenticated"},
		{"a token cut short", fileKeys.token(t, claims(fileIss))[:40], "", "", 401, "unauthenticated"},
	}
	n := 0
	for _, tt := range tests {
		n++
		h := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {fmt.Sprintf("k-%d", n)}, "Authorization": {"Bearer " + tt.token}}
		if tt.tenantHeader != "" {
			h.Set("X-Tenant-Id", tt.tenantHeader)
		}
		if tt.actorHeader != "" {
			h.Set("X-Actor-Id", tt.actorHeader)
		}
		before := executions.Load()
		a := do(t, "POST", srv.URL+"/v1/tickets", h, `{}`)
		if a.status != tt.status || problemType(a) != tt.problem || (executions.Load() > before) != (tt.status == 201) {
			t.Errorf("%s: %d %s %v; want %d %s", tt.name, a.status, problemType(a), a.problem["detail"], tt.status, tt.problem)
		}
		if tt.status == 401 && !strings.Contains(a.header.Get("Www-Authenticate"), `error="invalid_token"`) {
			t.Errorf("%s: WWW-Authenticate %q", tt.name, a.header.Get("Www-Authenticate"))
		}
	}
	code, rec := adminDo(t, gw.AdminHandler(""), "GET", "/v1/records/acme/create/k-2", "", "")
	if code != 200 || rec["actor"] != "user-1" {
		t.Errorf("the receipt of a URL client's call: %d %v; want tenant acme, actor user-1 (its sub)", code, rec)
	}
}

// TestConflictTellsOnlyItsFirstCaller: with clients, a 422 tells of the record (its fingerprint,
// remote id and the fields that differ) only to the caller who first used the key; another client
// of the same tenant learns that the key is taken, and nothing of the first caller's request, not
// even one field at a time through differing_fields
// (docs/security.md#who-sees-a-conflicts-details). A record written before clients were configured
// names no caller, so it tells no one.
func TestConflictTellsOnlyItsFirstCaller(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		up, executions := countingUpstream(t)
		store := open(t)
		clients := fmt.Sprintf(authRoutes, up.URL, `
  api_keys:
    - {name: alice, key: "`+keyHash("alice-s3cret")+`", tenant: acme}
    - {name: bob, key: "`+keyHash("bob-s3cret")+`", tenant: acme}`)
		srv, _, _ := newGatewayOn(t, store, clients, gateway.Options{})
		send := func(url, who, key, body string) reply {
			h := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {key}}
			if who != "" {
				h.Set("Authorization", "Bearer "+who+"-s3cret")
			}
			if who == "" {
				h.Set("X-Tenant-Id", "acme")
			}
			return do(t, "POST", url+"/v1/tickets", h, body)
		}
		told := func(a reply) string {
			var parts []string
			for _, m := range []string{"existing_fingerprint", "existing_remote_id", "differing_fields"} {
				if _, ok := a.problem[m]; ok {
					parts = append(parts, m)
				}
			}
			return strings.Join(parts, " ")
		}
		first := `{"note":"refund for alice","amount":4200,"card":"4111-xxxx"}`
		a := send(srv.URL, "alice", "run-17-step-3", first)
		if a.status != 201 {
			t.Fatalf("alice: %d %v", a.status, a.problem)
		}
		alices := a.header.Get("Idempotency-Fingerprint")
		a = send(srv.URL, "bob", "run-17-step-3", `{"note":"x","amount":100}`)
		if a.status != 422 || told(a) != "" || a.problem["received_fingerprint"] == nil || strings.Contains(fmt.Sprint(a.problem), alices) {
			t.Errorf("bob's conflict: %d %v; want a 422 that tells nothing of alice's record", a.status, a.problem)
		}
		if a := send(srv.URL, "alice", "run-17-step-3", `{"note":"x","amount":100}`); a.status != 422 ||
			told(a) != "existing_fingerprint existing_remote_id differing_fields" || a.problem["existing_remote_id"] != "T-1" {
			t.Errorf("alice's own conflict: %d %v; want the record's fingerprint, remote id and differing fields", a.status, a.problem)
		}

		// A record from before the clients section: written by a gateway without clients.
		plainRoutes := strings.Replace(fmt.Sprintf(authRoutes, up.URL, ""), "clients:\n\n", "", 1)
		plain, _, _ := newGatewayOn(t, store, plainRoutes, gateway.Options{})
		if a := send(plain.URL, "", "old-key", first); a.status != 201 {
			t.Fatalf("without clients: %d %v", a.status, a.problem)
		}
		if a := send(srv.URL, "alice", "old-key", `{"note":"x"}`); a.status != 422 || told(a) != "" {
			t.Errorf("a conflict on a record without a caller: %d %v; want a 422 that tells nothing of it", a.status, a.problem)
		}
		if n := executions.Load(); n != 2 {
			t.Errorf("%d executions, want 2", n)
		}
	})
}

// readCounter is a request body that counts the bytes read from it.
type readCounter struct {
	r io.Reader
	n int
}

func (c *readCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func (c *readCounter) Close() error { return nil }

// TestCallerRefusedBeforeTheBody (docs/security.md#who-is-calling): with clients, a request
// without a credential they accept is refused 401 before a byte of its body is read, on every
// kind of route, a kind: mcp route's too, whose front end must otherwise read the body to know the
// tool it calls.
func TestCallerRefusedBeforeTheBody(t *testing.T) {
	t.Parallel()
	up, executions := countingUpstream(t)
	_, _, gw := newGatewayYAML(t, openEmbedded, fmt.Sprintf(`
upstreams:
  up: {url: %s}
clients:
  api_keys:
    - {name: agent-a, key: "%s", tenant: acme}
routes:
  - {name: create, upstream: up, method: POST, path: /v1/tickets, class: non_idempotent}
  - {name: tools, kind: mcp, upstream: up, path: /mcp, key: {meta: %s}}
`, up.URL, keyHash("alpha-s3cret"), metaKey), gateway.Options{})
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_ticket","arguments":{},"_meta":{"` + metaKey + `":"k1"}}}`
	for _, c := range []struct{ path, body string }{{"/v1/tickets", `{"title":"x"}`}, {"/mcp", call}} {
		body := &readCounter{r: strings.NewReader(c.body)}
		req := httptest.NewRequest(http.MethodPost, c.path, body)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Idempotency-Key", "k1")
		req.Header.Set("Authorization", "Bearer alpha-s3cret-not")
		rec := httptest.NewRecorder()
		gw.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized || body.n != 0 {
			t.Errorf("%s with a wrong key: %d, %d bytes of the body read; want 401 and none read", c.path, rec.Code, body.n)
		}
	}
	if n := executions.Load(); n != 0 {
		t.Errorf("the upstream was called %d times", n)
	}
}
