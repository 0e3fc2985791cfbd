package routes

import (
	"crypto/sha256"
	"net/url"
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestParseClients checks every resolved field of clients.good.yml: hashes in either case of hex,
// header names in canonical form, the default header and algorithms, the key set read from its
// file.
func TestParseClients(t *testing.T) {
	t.Parallel()
	cfg, err := parseFile(t, "clients.good.yml")
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := os.ReadFile("testdata/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	want := &Clients{
		APIKeys: []*APIKeyClient{
			{Name: "billing-agent", Header: "Authorization", KeySHA256: sha256.Sum256([]byte("test")), Tenant: "acme"},
			{Name: "ops-bot", Header: "X-Api-Key", KeySHA256: sha256.Sum256([]byte("test2")), Tenant: "globex", Actor: "ops-bot"},
		},
		JWT: []*JWTClient{
			{Name: "corp-sso", JWKSFile: "testdata/jwks.json", JWKS: jwks, Issuer: "https://sso.example.com/",
				Audience: "idemgateway", Algorithms: JWTAlgorithms, TenantClaim: "org", ActorClaim: "sub"},
			{Name: "partner", JWKSURL: &url.URL{Scheme: "https", Host: "partner.example.com", Path: "/.well-known/jwks.json"},
				Issuer: "https://partner.example.com/", Audience: "idemgateway", Algorithms: []string{"ES256"},
				TenantClaim: "https://partner.example.com/tenant"},
		},
	}
	if !reflect.DeepEqual(cfg.Clients, want) {
		t.Errorf("Clients:\n got %+v %+v\nwant %+v %+v", cfg.Clients.APIKeys, cfg.Clients.JWT, want.APIKeys, want.JWT)
	}
	if got := cfg.Routes[0].OpaquePathParams; !reflect.DeepEqual(got, []string{"*", "folder"}) {
		t.Errorf("OpaquePathParams = %q", got)
	}
	if cfg, err := parseFile(t, "minimal.good.yml"); err != nil || cfg.Clients != nil {
		t.Errorf("a file without clients: Clients = %+v, %v; want nil", cfg.Clients, err)
	}
	_, err = Parse("t.yaml", []byte("upstreams: {u: {url: 'http://u'}}\nclients: {}\nroutes: [{name: r, upstream: u, method: GET, path: /, class: read_only}]\n"), nil)
	if want := "t.yaml: clients: no client: list api_keys or jwt clients, or remove the section to run without authentication"; err == nil || err.Error() != want {
		t.Errorf("an empty clients section: %v, want %s", err, want)
	}
}

// TestCheckTenant is the bound on tenants and actors (docs/security.md#input-bounds): 1 to 128
// bytes of RFC 9110 token characters.
func TestCheckTenant(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, value, err string
	}{
		{"letters", "acme", ""},
		{"every tchar", "a!#$%&'*+-.^_`|~09AZ", ""},
		{"128 bytes", strings.Repeat("t", 128), ""},
		{"empty", "", "empty"},
		{"129 bytes", strings.Repeat("t", 129), "129 bytes, longer than 128"},
		{"a space", "acme corp", "byte 4 is not a token character (RFC 9110 §5.6.2)"},
		{"a slash", "acme/eu", "byte 4 is not a token character (RFC 9110 §5.6.2)"},
		{"a control byte", "acme\x01", "byte 4 is not a token character (RFC 9110 §5.6.2)"},
		{"DEL", "\x7f", "byte 0 is not a token character (RFC 9110 §5.6.2)"},
		{"non-ASCII", "acmé", "byte 3 is not a token character (RFC 9110 §5.6.2)"},
		{"a quote", `"acme"`, "byte 0 is not a token character (RFC 9110 §5.6.2)"},
		{"a comma", "a,b", "byte 1 is not a token character (RFC 9110 §5.6.2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := CheckTenant(tc.value)
			if (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
				t.Errorf("CheckTenant(%q) = %v, want %q", tc.value, err, tc.err)
			}
		})
	}
}
