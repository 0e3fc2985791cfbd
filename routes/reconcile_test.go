package routes

import "testing"

// TestForwardKeyAndReconcile: forward_key makes release the default for non_idempotent routes
// (re-executing is then safe), unless the route reconciles; a reconcile block resolves whole.
func TestForwardKeyAndReconcile(t *testing.T) {
	t.Parallel()
	cfg, err := Parse("routes.yaml", []byte(`
upstreams:
  stripe: {url: "http://127.0.0.1:9000", forward_key: idempotency-key}
  plain: {url: "http://127.0.0.1:9001"}
routes:
  - {name: refund, upstream: stripe, method: POST, path: /v1/refunds, class: non_idempotent}
  - {name: plain, upstream: plain, method: POST, path: /v1/plain, class: non_idempotent}
  - name: ticket
    upstream: stripe
    method: POST
    path: /v1/tickets
    class: non_idempotent
    reconcile:
      inject: {body_pointer: /external_id, value: "{key}"}
      path: "/v1/tickets?external_id={key}"
      found: /data/0
      remote_id: /data/0/id
      status: 201
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	refund, plain, ticket := cfg.Routes[0], cfg.Routes[1], cfg.Routes[2]
	if refund.Upstream.ForwardKey != "Idempotency-Key" || refund.OnUnknownOutcome != Release {
		t.Errorf("refund: forward_key %q, on_unknown_outcome %q; want Idempotency-Key, release", refund.Upstream.ForwardKey, refund.OnUnknownOutcome)
	}
	if plain.OnUnknownOutcome != Block {
		t.Errorf("plain: on_unknown_outcome %q, want block", plain.OnUnknownOutcome)
	}
	rc := ticket.Reconcile
	if ticket.OnUnknownOutcome != Block || rc == nil || rc.Inject == nil || rc.Inject.BodyPointer.String() != "/external_id" ||
		rc.Inject.Value.String() != "{key}" || rc.Path.String() != "/v1/tickets?external_id={key}" ||
		rc.Found.String() != "/data/0" || rc.RemoteID.String() != "/data/0/id" || !rc.RemoteURL.IsZero() || rc.Status != 201 ||
		rc.After != DefaultReconcileAfter {
		t.Errorf("ticket: %q %+v", ticket.OnUnknownOutcome, rc)
	}
}

// TestScopeAndTenantRequired: tenant_required and scope.credential resolve with their defaults
// and field checks.
func TestScopeAndTenantRequired(t *testing.T) {
	t.Parallel()
	cfg, err := Parse("routes.yaml", []byte(`
upstreams:
  t: {url: "http://127.0.0.1:9000"}
defaults: {tenant_required: true}
routes:
  - {name: a, upstream: t, method: POST, path: /a, class: non_idempotent, scope: {credential: true}}
  - {name: b, upstream: t, method: POST, path: /b, class: non_idempotent, tenant_required: false,
     scope: {credential: true, credential_header: x-api-key}}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := cfg.Routes[0], cfg.Routes[1]
	if !a.TenantRequired || a.Scope.CredentialHeader != "Authorization" || b.TenantRequired || b.Scope.CredentialHeader != "X-Api-Key" {
		t.Fatalf("a: %v %+v; b: %v %+v", a.TenantRequired, a.Scope, b.TenantRequired, b.Scope)
	}
	_, err = Parse("bad.yaml", []byte(`
upstreams:
  t: {url: "http://127.0.0.1:9000"}
routes:
  - {name: a, upstream: t, method: POST, path: /a, class: non_idempotent, scope: {credential_header: "X Key"}}
  - {name: r, upstream: t, method: GET, path: /r, class: read_only, scope: {credential: true}}
`), nil)
	want := `bad.yaml: routes[0] "a": scope.credential_header: set without credential: true
bad.yaml: routes[1] "r": scope: meaningless on a read_only route, which never touches the store`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}
