package routes

import (
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/canonical"
)

func TestParseGoodFiles(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.good.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no good files: %v", err)
	}
	for _, file := range files {
		name := filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg, err := parseFile(t, name)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if len(cfg.Routes) == 0 {
				t.Fatal("no routes")
			}
			for _, r := range cfg.Routes {
				if r.Upstream == nil || r.Fingerprint == nil || (r.Method == "") != (r.Kind == KindMCP) || r.Path == "" {
					t.Errorf("route %q not resolved: %+v", r.Name, r)
				}
				if r.Upstream != cfg.Upstreams[r.Upstream.Name] {
					t.Errorf("route %q: upstream is not the config's", r.Name)
				}
			}
		})
	}
}

// badFiles holds, for every testdata/*.bad.yml, the exact lines of Parse's error.
var badFiles = joinBadFiles(decodeBadFiles, routeBadFiles, fingerprintBadFiles, upstreamBadFiles, clientsBadFiles)

// joinBadFiles joins tables of bad files into one; a file in two of them is a mistake of the test.
func joinBadFiles(tables ...map[string][]string) map[string][]string {
	all := map[string][]string{}
	for _, table := range tables {
		for name, lines := range table {
			if _, dup := all[name]; dup {
				panic(name + " is in two tables of bad files")
			}
			all[name] = lines
		}
	}
	return all
}

// decodeBadFiles are the files that do not decode as a routes file: YAML syntax, unknown
// fields, values of the wrong type, a second document. Where the only faults of decoding are
// unknown fields, the rest of the file is validated too (misspelt.bad.yml).
var decodeBadFiles = map[string][]string{
	"duplicate_key.bad.yml": {
		`duplicate_key.bad.yml:10: mapping key "path" already defined at line 8`,
	},
	"unknown_field.bad.yml": {
		`unknown_field.bad.yml:4: unknown field "tiemout"`,
		"unknown_field.bad.yml:6: cannot unmarshal !!int `30` into a duration (\"30s\")",
		"unknown_field.bad.yml:14: cannot unmarshal !!str `maybe` into a boolean",
		"unknown_field.bad.yml:16: cannot unmarshal !!int `201` into a list of integers",
	},
	"rules_decode.bad.yml": {
		"rules_decode.bad.yml:13: cannot unmarshal !!str `/labels` into a list of strings",
		"rules_decode.bad.yml:14: cannot unmarshal !!seq into a mapping",
		"rules_decode.bad.yml:16: cannot unmarshal !!str `trim` into a list of strings",
		"rules_decode.bad.yml:17: cannot unmarshal !!seq into a string",
		`rules_decode.bad.yml:18: unknown field "reorder"`,
	},
	"misspelt.bad.yml": { // unknown fields alone: the rest is validated too
		`misspelt.bad.yml:12: unknown field "recipt"`,
		`misspelt.bad.yml: routes[0] "create_ticket": upstream: "ticket": no such upstream`,
		`misspelt.bad.yml: routes[0] "create_ticket": class: "non_idempotnet": must be read_only, idempotent or non_idempotent`,
		`misspelt.bad.yml: routes[0] "create_ticket": fingerprint.body.exclude[0]: "trace_id": JSON Pointer must start with "/"`,
	},
	"syntax.bad.yml": {
		`syntax.bad.yml:4: did not find expected key`,
	},
	"two_documents.bad.yml": {
		`two_documents.bad.yml:6: a routes file holds one YAML document; found a second`,
	},
}

// routeBadFiles are the files whose routes, defaults and their settings are wrong.
var routeBadFiles = map[string][]string{
	"empty.bad.yml": {
		"empty.bad.yml: routes: at least one route is required",
	},
	"defaults.bad.yml": {
		`defaults.bad.yml: defaults.ttl: 0s: must be positive`,
		`defaults.bad.yml: defaults.unknown_ttl: 0s: must be positive`,
		`defaults.bad.yml: defaults.lock_lease: -10s: must be positive`,
		`defaults.bad.yml: defaults.concurrency: "queue": must be reject or wait`,
		`defaults.bad.yml: defaults.wait_timeout: 0s: must be positive`,
		`defaults.bad.yml: defaults.tenant_header: "X Tenant": invalid header name`,
		`defaults.bad.yml: defaults.actor_header: header name must not be empty`,
		`defaults.bad.yml: defaults.max_body_bytes: 0: must be positive`,
		`defaults.bad.yml: routes[0] "create_ticket": ttl: -1h0m0s: must be positive`,
		`defaults.bad.yml: routes[0] "create_ticket": lock_lease: 1ms: must be at least 100ms (the lease is renewed every third of it)`,
		`defaults.bad.yml: routes[0] "create_ticket": concurrency: "": must be reject or wait`,
		`defaults.bad.yml: routes[0] "create_ticket": tenant_header: "X-Tenant:": invalid header name`,
		`defaults.bad.yml: routes[0] "create_ticket": max_body_bytes: -5: must be positive`,
		`defaults.bad.yml: routes[1] "create_other": ttl: 100000h0m0s: must be at most 8760h0m0s (a year)`,
		`defaults.bad.yml: routes[2] "create_third": unknown_ttl: unknown_ttl 24h0m0s is shorter than ttl 48h0m0s: an unknown outcome must be kept at least as long as a receipt`,
		`defaults.bad.yml: routes[3] "create_fourth": unknown_ttl: 100000h0m0s: must be at most 8760h0m0s (a year)`,
	},
	"outcome.bad.yml": {
		`outcome.bad.yml: routes[0] "rules": outcome.error_codes: only on a route whose fingerprint.body.format is jsonrpc: it classes JSON-RPC errors`,
		`outcome.bad.yml: routes[0] "rules": outcome.body[0].pointer: required: the JSON Pointer of the member the rule reads`,
		`outcome.bad.yml: routes[0] "rules": outcome.body[1].pointer: "status": JSON Pointer must start with "/"`,
		`outcome.bad.yml: routes[0] "rules": outcome.body[2].equals: set one of equals and present`,
		`outcome.bad.yml: routes[0] "rules": outcome.body[3].equals: set one of equals and present`,
		`outcome.bad.yml: routes[0] "rules": outcome.body[4].class: required: committed, not_committed or unknown`,
		`outcome.bad.yml: routes[0] "rules": outcome.body[5].class: "maybe": must be committed, not_committed or unknown`,
		`outcome.bad.yml: routes[1] "nested": outcome.error_codes: holds lists of codes only (committed, not_committed, unknown)`,
		`outcome.bad.yml: routes[2] "tools": outcome.body: only on a kind: http route; a tools/call is classed by its JSON-RPC answer`,
	},
	"read_only.bad.yml": {
		`read_only.bad.yml: routes[0] "get_ticket": key: meaningless on a read_only route, which never touches the store`,
		`read_only.bad.yml: routes[0] "get_ticket": fingerprint: meaningless on a read_only route, which never touches the store`,
		`read_only.bad.yml: routes[0] "get_ticket": receipt: meaningless on a read_only route, which never touches the store`,
		`read_only.bad.yml: routes[0] "get_ticket": on_unknown_outcome: meaningless on a read_only route, which never touches the store`,
		`read_only.bad.yml: routes[0] "get_ticket": outcome: meaningless on a read_only route, which never touches the store`,
		`read_only.bad.yml: routes[0] "get_ticket": ttl: meaningless on a read_only route, which never touches the store`,
		`read_only.bad.yml: routes[0] "get_ticket": unknown_ttl: meaningless on a read_only route, which never touches the store`,
		`read_only.bad.yml: routes[0] "get_ticket": lock_lease: meaningless on a read_only route, which never touches the store`,
		`read_only.bad.yml: routes[0] "get_ticket": concurrency: meaningless on a read_only route, which never touches the store`,
		`read_only.bad.yml: routes[0] "get_ticket": wait_timeout: meaningless on a read_only route, which never touches the store`,
		`read_only.bad.yml: routes[1] "list_tickets": fingerprint: meaningless on a read_only route, which never touches the store`,
	},
	"upgrade.bad.yml": {
		`upgrade.bad.yml: routes[1] "socket_h2c": upgrade: "h2c": unknown protocol (want websocket)`,
		`upgrade.bad.yml: routes[2] "socket_case": upgrade: "WebSocket": unknown protocol (want websocket)`,
		`upgrade.bad.yml: routes[3] "put_socket": upgrade: only a read_only route may upgrade: the upgraded connection is a tunnel the gateway neither reads nor makes idempotent`,
		`upgrade.bad.yml: routes[4] "post_socket": upgrade: only a read_only route may upgrade: the upgraded connection is a tunnel the gateway neither reads nor makes idempotent`,
	},
	"routes.bad.yml": {
		`routes.bad.yml: routes[1] "create_ticket": name: duplicate route name; first used by routes[0]`,
		`routes.bad.yml: routes[1] "create_ticket": upstream: "nowhere": no such upstream`,
		`routes.bad.yml: routes[1] "create_ticket": method: "PO ST": invalid HTTP method`,
		`routes.bad.yml: routes[1] "create_ticket": path: "v1/tickets": must start with "/"`,
		`routes.bad.yml: routes[1] "create_ticket": class: "side_effect": must be read_only, idempotent or non_idempotent`,
		`routes.bad.yml: routes[2]: name: required`,
		`routes.bad.yml: routes[2]: method: required`,
		`routes.bad.yml: routes[2]: path: required`,
		`routes.bad.yml: routes[2]: class: required: read_only, idempotent or non_idempotent`,
		`routes.bad.yml: routes[3] "bad name!": name: must be letters, digits, '_', '.' or '-'`,
		`routes.bad.yml: routes[3] "bad name!": path: POST /v1/tickets is already routed by routes[0] "create_ticket"`,
		`routes.bad.yml: routes[5] "by_other_id": path: GET /v1/tickets/{ticket} is already routed by routes[4] "by_id"`,
		`routes.bad.yml: routes[6] "p1": path: "/a/{id}/{id}": duplicate parameter "id"`,
		`routes.bad.yml: routes[7] "p2": path: "/a/{id": unclosed "{" at byte 3`,
		`routes.bad.yml: routes[8] "p3": path: "/a/id}": unbalanced "}" at byte 5`,
		`routes.bad.yml: routes[9] "p4": path: "/a/*/b": not a valid chi pattern: wildcard '*' must be the last value in a route. trim trailing text or use a '{param}' instead`,
		`routes.bad.yml: routes[10] "p5": path: "/a/{id:[0-9}": not a valid chi pattern: invalid regexp pattern '^[0-9$' in route param`,
		`routes.bad.yml: routes[11] "p6": path: "/a/{}": parameter at byte 3 has no name`,
		`routes.bad.yml: routes[12] "p7": path: "/a?b=1": must not contain white space, control characters, "?" or "#"`,
		`routes.bad.yml: routes[13] "p8": path: "/a b": must not contain white space, control characters, "?" or "#"`,
	},
}

// fingerprintBadFiles are the files whose keys, fingerprints, receipts, outcomes and reconciles are
// wrong.
var fingerprintBadFiles = map[string][]string{
	"fingerprint.bad.yml": {
		`fingerprint.bad.yml: routes[0] "create_ticket": key.header: "Idempotency Key": invalid header name`,
		`fingerprint.bad.yml: routes[0] "create_ticket": fingerprint.body.include[1]: "/title~2": invalid JSON Pointer escape`,
		`fingerprint.bad.yml: routes[0] "create_ticket": fingerprint.body.include[2]: "title": JSON Pointer must start with "/"`,
		`fingerprint.bad.yml: routes[0] "create_ticket": fingerprint.body.include[3]: "/title": duplicate of include[0]`,
		`fingerprint.bad.yml: routes[0] "create_ticket": fingerprint.body.exclude[0]: "": empty JSON Pointer`,
		`fingerprint.bad.yml: routes[0] "create_ticket": fingerprint.query[1]: query parameter name must not be empty`,
		`fingerprint.bad.yml: routes[0] "create_ticket": fingerprint.query[2]: "dry_run": duplicate of query[0]`,
		`fingerprint.bad.yml: routes[0] "create_ticket": fingerprint.headers[1]: "X Account": invalid header name`,
		`fingerprint.bad.yml: routes[0] "create_ticket": fingerprint.headers[2]: "x-account": duplicate of headers[0] (names are case-insensitive)`,
		`fingerprint.bad.yml: routes[0] "create_ticket": receipt.remote_id: "id": JSON Pointer must start with "/"`,
		`fingerprint.bad.yml: routes[0] "create_ticket": receipt.remote_url: "/url~": invalid JSON Pointer escape`,
		`fingerprint.bad.yml: routes[0] "create_ticket": on_unknown_outcome: "ignore": must be block or release`,
		`fingerprint.bad.yml: routes[0] "create_ticket": outcome.committed[1]: 99: must be a status code from 200 to 599`,
		`fingerprint.bad.yml: routes[0] "create_ticket": outcome.not_committed[1]: 409: listed twice`,
		`fingerprint.bad.yml: routes[0] "create_ticket": outcome.not_committed[2]: 600: must be a status code from 200 to 599`,
		`fingerprint.bad.yml: routes[0] "create_ticket": outcome.unknown[0]: 402: also in outcome.committed; a code may stand in one list only`,
		`fingerprint.bad.yml: routes[0] "create_ticket": outcome.unknown[2]: 101: a 1xx is never a final answer; the gateway counts it an unknown outcome, whatever the lists say`,
		`fingerprint.bad.yml: routes[1] "rpc_create": fingerprint.body.include: "/id": a JSON-RPC request's pointers start with /params (e.g. /params/arguments/title) or /method`,
		`fingerprint.bad.yml: routes[1] "rpc_create": fingerprint.body.include: "/arguments/priority": a JSON-RPC request's pointers start with /params (e.g. /params/arguments/title) or /method`,
	},
	"rules.bad.yml": {
		`rules.bad.yml: routes[0] "x": fingerprint.body.sets[1]: "labels": JSON Pointer must start with "/"`,
		`rules.bad.yml: routes[0] "x": fingerprint.body.sets[2]: "/labels": duplicate of sets[0]`,
		`rules.bad.yml: routes[0] "x": fingerprint.body.sets[3]: "/a~": invalid JSON Pointer escape`,
		`rules.bad.yml: routes[0] "x": fingerprint.body.defaults["/deep"]: line 20: duplicate mapping key "a"`,
		`rules.bad.yml: routes[0] "x": fingerprint.body.defaults["/meta~2"]: "/meta~2": invalid JSON Pointer escape`,
		`rules.bad.yml: routes[0] "x": fingerprint.body.defaults["/nan"]: line 18: ".nan": number cannot be written as JSON`,
		`rules.bad.yml: routes[0] "x": fingerprint.body.defaults["/priority"]: line 17: ".inf": number cannot be written as JSON`,
		`rules.bad.yml: routes[0] "x": fingerprint.body.defaults["metadata"]: "metadata": JSON Pointer must start with "/"`,
		`rules.bad.yml: routes[0] "x": fingerprint.body.normalize["/name"]: no operations (want a list of trim, collapse_space, casefold or nfc)`,
		`rules.bad.yml: routes[0] "x": fingerprint.body.normalize["/tags"][1]: "NFC": unknown normalization (want trim, collapse_space, casefold or nfc)`,
		`rules.bad.yml: routes[0] "x": fingerprint.body.normalize["/title"][1]: "upper": unknown normalization (want trim, collapse_space, casefold or nfc)`,
		`rules.bad.yml: routes[0] "x": fingerprint.body.normalize["title"]: "title": JSON Pointer must start with "/"`,
		`rules.bad.yml: routes[0] "x": fingerprint.body.format: "xml": unknown format (want json, form, multipart, graphql or jsonrpc)`,
		`rules.bad.yml: routes[1] "y": fingerprint.body.format: "GraphQL": unknown format (want json, form, multipart, graphql or jsonrpc)`,
	},
	"key.bad.yml": {
		`key.bad.yml: routes[0] "x": key.from: "tenant": want body:/POINTER, query:NAME or header:NAME`,
		`key.bad.yml: routes[0] "x": key.derive: "create_ticket": a template needs at least one {field}`,
		`key.bad.yml: routes[1] "y": key.from: "body:meta/key": field {body:meta/key}: "meta/key": JSON Pointer must start with "/"`,
		`key.bad.yml: routes[1] "y": key.derive: "{tenant}:{body:/a~2}": field {body:/a~2}: "/a~2": invalid JSON Pointer escape`,
		`key.bad.yml: routes[1] "y": receipt.replay_headers[1]: "Set-Cookie": never replayed (it would hand a caller another's session, credentials or rate limits)`,
		`key.bad.yml: routes[1] "y": receipt.replay_headers[2]: "X Bad": invalid header name`,
		`key.bad.yml: routes[1] "y": receipt.replay_headers[3]: "X-RateLimit-Remaining": never replayed (it would hand a caller another's session, credentials or rate limits)`,
		`key.bad.yml: routes[1] "y": receipt.replay_headers[4]: "x-rate-limit-limit": never replayed (it would hand a caller another's session, credentials or rate limits)`,
		`key.bad.yml: routes[1] "y": receipt.replay_headers[5]: "RateLimit-Reset": never replayed (it would hand a caller another's session, credentials or rate limits)`,
	},
	"reconcile.bad.yml": {
		`reconcile.bad.yml: upstreams.t.forward_key: "Idempotency Key": invalid header name`,
		`reconcile.bad.yml: routes[0] "x": reconcile.inject.body_pointer: "external_id": JSON Pointer must start with "/"`,
		`reconcile.bad.yml: routes[0] "x": reconcile.inject.value: "{nope}": field {nope}: want {tenant}, {key}, {path:NAME}, {body:/POINTER}, {query:NAME} or {header:NAME}`,
		`reconcile.bad.yml: routes[0] "x": reconcile.path: "v1/x?id={key}": must start with "/"`,
		`reconcile.bad.yml: routes[0] "x": reconcile.found: required: a JSON Pointer to what exists when the effect happened`,
		`reconcile.bad.yml: routes[0] "x": reconcile.after: 1s: must be at least the upstream's timeout (5s): the lookup must not run while the call may be under way`,
		`reconcile.bad.yml: routes[0] "x": reconcile.status: 404: a found effect replays a 2xx status`,
		`reconcile.bad.yml: routes[0] "x": on_unknown_outcome: release frees unknown outcomes at once, so reconcile would never run; use block`,
		`reconcile.bad.yml: routes[1] "y": reconcile: meaningless on a read_only route, which never touches the store`,
	},
}

// upstreamBadFiles are the files whose upstreams are wrong.
var upstreamBadFiles = map[string][]string{
	"upstreams.bad.yml": {
		`upstreams.bad.yml: upstreams.bad name: name "bad name": must be letters, digits, '_', '.' or '-'`,
		`upstreams.bad.yml: upstreams.bad name.timeout: 0s: must be positive`,
		`upstreams.bad.yml: upstreams.bad name.strip_prefix: "api": must start with "/" and hold no white space, "?" or "#"`,
		`upstreams.bad.yml: upstreams.badport.url: "http://[redacted]@h:port/": invalid port ":port" after host`,
		`upstreams.bad.yml: upstreams.creds.url: "https://[redacted]@h.example.com/": must not hold credentials; set them in headers`,
		`upstreams.bad.yml: upstreams.fragment.url: "http://h/#top": must not have a fragment`,
		`upstreams.bad.yml: upstreams.ftp.url: "ftp://x": scheme must be http or https`,
		`upstreams.bad.yml: upstreams.headers.headers.Authorization: environment variable MISSING_TOKEN is not set`,
		`upstreams.bad.yml: upstreams.headers.headers.Bad Name: "Bad Name": invalid header name`,
		`upstreams.bad.yml: upstreams.headers.headers.Host: set by the proxy; an upstream may not set it`,
		`upstreams.bad.yml: upstreams.headers.headers.X-Broken: unterminated ${ reference; want ${NAME}`,
		`upstreams.bad.yml: upstreams.headers.headers.X-Malformed: malformed ${...} reference; want ${NAME}, NAME of letters, digits and underscores, or ${file:/PATH}`,
		`upstreams.bad.yml: upstreams.headers.headers.X-Malformed: malformed ${...} reference; want ${NAME}, NAME of letters, digits and underscores, or ${file:/PATH}`,
		`upstreams.bad.yml: upstreams.headers.headers.X-Malformed: malformed ${...} reference; want ${NAME}, NAME of letters, digits and underscores, or ${file:/PATH}`,
		`upstreams.bad.yml: upstreams.headers.headers.X-Newline: value holds characters not allowed in a header (after ${VAR} expansion)`,
		`upstreams.bad.yml: upstreams.headers.headers.x-dup: duplicate header (names are case-insensitive)`,
		`upstreams.bad.yml: upstreams.hostport.url: "127.0.0.1:9300": not an absolute URL: want http:// or https://, a host and an optional port and base path (such as http://127.0.0.1:9000)`,
		`upstreams.bad.yml: upstreams.nohost.url: "http:///v1": must have a host`,
		`upstreams.bad.yml: upstreams.noscheme.url: "tickets.example.com/api": not an absolute URL: want http:// or https://, a host and an optional port and base path (such as http://127.0.0.1:9000)`,
		`upstreams.bad.yml: upstreams.nourl.url: required`,
		`upstreams.bad.yml: upstreams.nourl.timeout: -1s: must be positive`,
		`upstreams.bad.yml: upstreams.query.url: "http://h/?a=1": must not have a query`,
	},
}

// clientsBadFiles are the files whose clients (API keys, JWT issuers) are wrong.
var clientsBadFiles = map[string][]string{
	"clients.bad.yml": {
		`clients.bad.yml: clients.api_keys[0] "plain": key: must be sha256:<64 hex digits>, the SHA-256 of the key; never the key itself`,
		`clients.bad.yml: clients.api_keys[1]: name: required`,
		`clients.bad.yml: clients.api_keys[1]: header: "X Api Key": invalid header name`,
		`clients.bad.yml: clients.api_keys[1]: key: must be sha256:<64 hex digits>, the SHA-256 of the key; never the key itself`,
		`clients.bad.yml: clients.api_keys[1]: tenant: "a/b": byte 1 is not a token character (RFC 9110 §5.6.2)`,
		`clients.bad.yml: clients.api_keys[2] "plain": name: duplicate client name; first used by clients.api_keys[0] "plain"`,
		`clients.bad.yml: clients.api_keys[2] "plain": header: "Host": set by the proxy; a client cannot send its key in it`,
		`clients.bad.yml: clients.api_keys[2] "plain": tenant: required: the client's tenant`,
		`clients.bad.yml: clients.api_keys[3] "twin": header: "host": set by the proxy; a client cannot send its key in it`,
		`clients.bad.yml: clients.api_keys[3] "twin": key: the same key as clients.api_keys[2] "plain", in the same header: a key names one client`,
		`clients.bad.yml: clients.api_keys[3] "twin": actor: "agent 7": byte 5 is not a token character (RFC 9110 §5.6.2)`,
		`clients.bad.yml: clients.jwt[0] "nokeys": jwks_file or jwks_url is required: the keys that sign the tokens`,
		`clients.bad.yml: clients.jwt[1] "both": jwks_url: set with jwks_file; set one of them`,
		`clients.bad.yml: clients.jwt[1] "both": issuer: "https://a.example/": also the issuer of clients.jwt[0] "nokeys"; an issuer names one client`,
		`clients.bad.yml: clients.jwt[1] "both": audience: required: a value the tokens' aud must hold`,
		`clients.bad.yml: clients.jwt[2] "missing-file": jwks_file: testdata/no-such-jwks.json: no such file or directory`,
		`clients.bad.yml: clients.jwt[3] "not-a-set": jwks_file: testdata/minimal.good.yml: not a JSON Web Key Set with keys (RFC 7517 §5)`,
		`clients.bad.yml: clients.jwt[4] "plain-http": jwks_url: "http://sso.example.com/jwks": http only to a loopback host; use https`,
		`clients.bad.yml: clients.jwt[4] "plain-http": algorithms[0]: "HS256": not an asymmetric JWS algorithm (want one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA)`,
		`clients.bad.yml: clients.jwt[4] "plain-http": algorithms[1]: "none": not an asymmetric JWS algorithm (want one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA)`,
		`clients.bad.yml: clients.jwt[4] "plain-http": algorithms[3]: "ES256": duplicate of algorithms[2]`,
		`clients.bad.yml: clients.jwt[5] "no-algorithms": jwks_url: "https://[redacted]@sso.example.com/jwks": must not hold credentials`,
		`clients.bad.yml: clients.jwt[5] "no-algorithms": algorithms: empty: no token could be verified; leave it out for the default`,
		`clients.bad.yml: clients.jwt[6] "ftp": jwks_url: "ftp://sso.example.com/jwks": scheme must be https`,
		`clients.bad.yml: clients.jwt[6] "ftp": issuer: required: the iss that tokens must carry`,
		`clients.bad.yml: clients.jwt[6] "ftp": audience: required: a value the tokens' aud must hold`,
		`clients.bad.yml: clients.jwt[6] "ftp": tenant_claim: required: the claim that holds the tenant`,
		`clients.bad.yml: routes[0] "get_file": opaque_path_params[1]: "nam": no such parameter in path "/v1/files/{folder}/{name}"`,
		`clients.bad.yml: routes[0] "get_file": opaque_path_params[2]: "name": duplicate of opaque_path_params[0]`,
		`clients.bad.yml: routes[0] "get_file": opaque_path_params[3]: "*": no such parameter in path "/v1/files/{folder}/{name}"`,
		`clients.bad.yml: routes[1] "this-name-is-far-too-long-for-a-tool-name-since-the-tool-name-is-part-of-every-store-key-and-the-store-key-must-stay-bounded-to-128": name: 131 bytes, longer than 128 (the tool name is part of every record's store key)`,
	},
}

func TestParseBadFiles(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.bad.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if _, ok := badFiles[filepath.Base(file)]; !ok {
			t.Errorf("%s has no entry in badFiles", file)
		}
	}
	for name, want := range badFiles {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg, err := parseFile(t, name)
			if err == nil {
				t.Fatalf("Parse = %+v, want an error", cfg)
			}
			if cfg != nil {
				t.Errorf("Parse returned a Config with its error")
			}
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error %T is not Errors", err)
			}
			got := strings.Split(err.Error(), "\n")
			if len(errs) != len(got) {
				t.Errorf("Errors has %d elements, Error() %d lines", len(errs), len(got))
			}
			if !slices.Equal(got, want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			for _, e := range errs {
				var fe *FieldError
				if !errors.As(e, &fe) || fe.File != name {
					t.Errorf("%q is not a *FieldError of %s", e, name)
				}
			}
			assertNoSecret(t, err.Error())
		})
	}
}

// mustTemplate parses a key template that a test knows to be valid.
func mustTemplate(t *testing.T, s string) *KeyTemplate {
	t.Helper()
	kt, err := ParseKeyTemplate(s)
	if err != nil {
		t.Fatal(err)
	}
	return kt
}

// TestParseFull checks every field of full.good.yml, and which of the route, the defaults block
// and the Default constants each resolved value comes from.
func TestParseFull(t *testing.T) {
	t.Parallel()
	cfg, err := parseFile(t, "full.good.yml")
	if err != nil {
		t.Fatal(err)
	}
	want := fullConfig(t)
	checkFullFingerprints(t, cfg.Routes)
	if !reflect.DeepEqual(cfg, want) {
		for i := range max(len(cfg.Routes), len(want.Routes)) {
			if i >= len(cfg.Routes) || i >= len(want.Routes) || !reflect.DeepEqual(cfg.Routes[i], want.Routes[i]) {
				t.Errorf("routes[%d]:\n got %+v\nwant %+v", i, cfg.Routes[i], want.Routes[i])
			}
		}
		for name, u := range want.Upstreams {
			if !reflect.DeepEqual(cfg.Upstreams[name], u) {
				t.Errorf("upstreams.%s:\n got %+v\nwant %+v", name, cfg.Upstreams[name], u)
			}
		}
		if len(cfg.Upstreams) != len(want.Upstreams) {
			t.Errorf("got %d upstreams, want %d", len(cfg.Upstreams), len(want.Upstreams))
		}
	}
}

// fullConfig is the Config that full.good.yml resolves to, its routes' Fingerprints left out.
func fullConfig(t *testing.T) *Config {
	t.Helper()
	tickets := &Upstream{
		Name:        "tickets",
		URL:         &url.URL{Scheme: "https", Host: "tickets.example.com", Path: "/api"},
		Timeout:     20 * time.Second,
		StripPrefix: "/tickets",
		Headers: Secrets{
			"Authorization": {"Bearer s3cr3t-tickets-token"},
			"X-Client":      {"idemgateway $1 s3cr3t-client-id"}, // a bare "$" stays
		},
	}
	billing := &Upstream{
		Name:    "billing",
		URL:     &url.URL{Scheme: "http", Host: "127.0.0.1:9001"},
		Timeout: DefaultUpstreamTimeout,
	}
	return &Config{
		Upstreams: map[string]*Upstream{"tickets": tickets, "billing": billing},
		Routes:    fullRoutes(t, tickets, billing),
	}
}

// fullRoutes are the routes of full.good.yml, on its upstreams tickets and billing.
func fullRoutes(t *testing.T, tickets, billing *Upstream) []*Route {
	t.Helper()
	routes := []*Route{
		{ // every field set on the route
			Name:     "create_ticket",
			Kind:     KindHTTP,
			Upstream: tickets,
			Method:   "POST",
			Path:     "/tickets/v1/tickets",
			Class:    NonIdempotent,
			Key: Key{Header: "X-Request-Key", Required: false,
				From:   KeySource{Source: SourceBody, Name: "/request_key", Pointer: mustPointer(t, "/request_key")},
				Derive: mustTemplate(t, "{tenant}:{body:/customer_id}:create_ticket")},
			Receipt: Receipt{
				RemoteID:  mustPointer(t, "/id"),
				RemoteURL: mustPointer(t, "/url"),
			},
			OnUnknownOutcome: Release,
			Outcome: Outcome{
				Committed:    []int{402},
				NotCommitted: []int{409, 500},
				Unknown:      []int{429},
			},
			TTL:          time.Hour,
			UnknownTTL:   DefaultUnknownTTL,
			LockLease:    30 * time.Second,
			Concurrency:  Reject,
			WaitTimeout:  2 * time.Second,
			TenantHeader: "X-Tenant",
			ActorHeader:  "X-Actor",
			MaxBodyBytes: 2048,
		},
		{ // nothing set on the route: the defaults block, else the Default constants
			Name:             "update_ticket",
			Kind:             KindHTTP,
			Upstream:         tickets,
			Method:           "PUT", // upper-cased
			Path:             "/tickets/v1/tickets/{id}",
			Class:            Idempotent,
			Key:              Key{Header: DefaultKeyHeader, Required: false},
			OnUnknownOutcome: Release,
			TTL:              48 * time.Hour,
			UnknownTTL:       DefaultUnknownTTL,
			LockLease:        15 * time.Second,
			Concurrency:      Wait,
			WaitTimeout:      5 * time.Second,
			TenantHeader:     "X-Org-Id", // canonical form
			ActorHeader:      "X-Agent",
			MaxBodyBytes:     65536,
		},
		{
			Name:             "get_ticket",
			Kind:             KindHTTP,
			Upstream:         tickets,
			Method:           "GET",
			Path:             "/tickets/v1/tickets/{id}",
			Class:            ReadOnly,
			Key:              Key{Header: DefaultKeyHeader, Required: false},
			OnUnknownOutcome: Release,
			TTL:              48 * time.Hour,
			UnknownTTL:       DefaultUnknownTTL,
			LockLease:        15 * time.Second,
			Concurrency:      Wait,
			WaitTimeout:      5 * time.Second,
			TenantHeader:     "X-Tenant",
			ActorHeader:      "X-Agent",
			MaxBodyBytes:     1,
			Upgrade:          UpgradeWebSocket,
		},
		{ // the class's defaults: key required, block
			Name:             "charge",
			Kind:             KindHTTP,
			Upstream:         billing,
			Method:           "POST",
			Path:             "/v1/customers/{customer:[0-9]+}/charges",
			Class:            NonIdempotent,
			Key:              Key{Header: DefaultKeyHeader, Required: true},
			OnUnknownOutcome: Block,
			TTL:              48 * time.Hour,
			UnknownTTL:       90 * 24 * time.Hour,
			LockLease:        15 * time.Second,
			Concurrency:      Wait,
			WaitTimeout:      5 * time.Second,
			TenantHeader:     "X-Org-Id",
			ActorHeader:      "X-Agent",
			MaxBodyBytes:     65536,
		},
	}
	for _, r := range []struct{ name, path string }{
		{"create_issue", "/tickets/v1/issues"},
		{"issue_create", "/tickets/graphql"},
		{"mcp", "/tickets/mcp"},
	} { // the canonicalization rules: body rules only, else as update_ticket
		routes = append(routes, &Route{
			Name:             r.name,
			Kind:             KindHTTP,
			Upstream:         tickets,
			Method:           "POST",
			Path:             r.path,
			Class:            NonIdempotent,
			Key:              Key{Header: DefaultKeyHeader, Required: true},
			OnUnknownOutcome: Block,
			TTL:              48 * time.Hour,
			UnknownTTL:       DefaultUnknownTTL,
			LockLease:        15 * time.Second,
			Concurrency:      Wait,
			WaitTimeout:      5 * time.Second,
			TenantHeader:     "X-Org-Id",
			ActorHeader:      "X-Agent",
			MaxBodyBytes:     65536,
		})
	}
	return routes
}

// checkFullFingerprints checks the Fingerprint of each route of full.good.yml, then clears it,
// so that the routes compare with fullConfig's.
func checkFullFingerprints(t *testing.T, routes []*Route) {
	t.Helper()
	// Canonicalizers are opaque: check what each keeps of one request, then compare the rest.
	req := &canonical.Request{
		Tool:   "t",
		Method: "POST",
		Query:  url.Values{"dry_run": {"1"}, "other": {"2"}},
		Header: http.Header{"Content-Type": {"application/json"}, "X-Account": {"a"}, "X-Other": {"b"}},
		Body:   []byte(`{"title":"x","priority":1,"trace_id":"t","note":"n"}`),
	}
	wantDocs := []string{
		`{"body":{"/priority":1,"/title":"x"},"headers":{"x-account":["a"]},"method":"POST","path":{},"query":{"dry_run":["1"]},"tool":"t"}`,
		`{"body":{"note":"n","priority":1,"title":"x","trace_id":"t"},"headers":{},"method":"POST","path":{},"query":{},"tool":"t"}`,
		`{"body":{"note":"n","priority":1,"title":"x","trace_id":"t"},"headers":{},"method":"POST","path":{},"query":{},"tool":"t"}`,
		`{"body":{"note":"n","priority":1,"title":"x","trace_id":"t"},"headers":{},"method":"POST","path":{},"query":{},"tool":"t"}`,
		`{"body":{"/assignee":{"escalate":false,"ids":[31,1000],"level":1.5,"team":"ops"},"/labels":["a","b"],"/metadata":{},"/title":"disk full on db-1"},"headers":{},"method":"POST","path":{},"query":{},"tool":"t"}`,
		`{"body":{"document":"mutation IssueCreate($input:IssueCreateInput!){issueCreate(input:$input){issue{id url} success}}","operationName":"IssueCreate","variables":{"input":{"title":"x"}}},"headers":{},"method":"POST","path":{},"query":{},"tool":"t"}`,
		`{"body":{"method":"tools/call","params":{"arguments":{"title":"x"},"name":"create_ticket"}},"headers":{},"method":"POST","path":{},"query":{},"tool":"t"}`,
	}
	// The routes with canonicalization rules get a body of their format, sent as text/plain
	// (the format, not the Content-Type, says how to read it).
	bodies := map[string]string{
		"create_issue": `{"title":"  Disk  FULL on\tdb-1 ","labels":["b","a","b"],"priority":1}`,
		"issue_create": `{"query":"mutation IssueCreate($input: IssueCreateInput!) { issueCreate(input: $input) { success issue { url id } } }",` +
			`"variables":{"input":{"title":"x","clientMutationId":"c1"}},"extensions":{"persistedQuery":{"version":1}}}`,
		"mcp": `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"create_ticket","arguments":{"title":" x "},"_meta":{"progressToken":"p1"}}}`,
	}
	for i, r := range routes {
		if r.Fingerprint == nil {
			t.Errorf("route %q: nil Fingerprint", r.Name)
			continue
		}
		req := req
		if body, ok := bodies[r.Name]; ok {
			req = &canonical.Request{Tool: "t", Method: "POST", Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte(body)}
		}
		doc, err := r.Fingerprint.Document(req)
		if err != nil || string(doc) != wantDocs[i] {
			t.Errorf("route %q: Document = %s, %v; want %s", r.Name, doc, err, wantDocs[i])
		}
		r.Fingerprint = nil
	}
}

// TestParseBuiltinDefaults checks the Default constants on a file without a defaults block.
func TestParseBuiltinDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := parseFile(t, "minimal.good.yml")
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Routes[0]
	r.Fingerprint = nil
	want := &Route{
		Name:             "create_ticket",
		Kind:             KindHTTP,
		Upstream:         cfg.Upstreams["tickets"],
		Method:           "POST",
		Path:             "/v1/tickets",
		Class:            NonIdempotent,
		Key:              Key{Header: DefaultKeyHeader, Required: true},
		OnUnknownOutcome: Block,
		TTL:              DefaultTTL,
		UnknownTTL:       DefaultUnknownTTL,
		LockLease:        DefaultLockLease,
		Concurrency:      Reject,
		WaitTimeout:      DefaultWaitTimeout,
		TenantHeader:     DefaultTenantHeader,
		ActorHeader:      DefaultActorHeader,
		MaxBodyBytes:     DefaultMaxBodyBytes,
	}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("got  %+v\nwant %+v", r, want)
	}
	if u := cfg.Upstreams["tickets"]; u.Timeout != DefaultUpstreamTimeout || u.StripPrefix != "" || u.Headers != nil {
		t.Errorf("upstream %+v, want the defaults", u)
	}
}

func TestParseClassDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		route        string
		wantRequired bool
		wantPolicy   UnknownPolicy
	}{
		{"non_idempotent", "class: non_idempotent", true, Block},
		{"idempotent", "class: idempotent", false, Release},
		{"read_only", "class: read_only", false, Release},
		{"optional key on non_idempotent", "class: non_idempotent\n    key: {required: false}", false, Block},
		{"required key on idempotent", "class: idempotent\n    key: {required: true}", true, Release},
		{"block on idempotent", "class: idempotent\n    on_unknown_outcome: block", false, Block},
		{"release on non_idempotent", "class: non_idempotent\n    on_unknown_outcome: release", true, Release},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data := "upstreams: {u: {url: 'http://u'}}\nroutes:\n  - name: r\n    upstream: u\n    method: POST\n    path: /\n    " + tt.route + "\n"
			cfg, err := Parse("t.yaml", []byte(data), lookupTestEnv)
			if err != nil {
				t.Fatal(err)
			}
			r := cfg.Routes[0]
			if r.Key.Required != tt.wantRequired || r.OnUnknownOutcome != tt.wantPolicy {
				t.Errorf("Key.Required = %v, OnUnknownOutcome = %q; want %v, %q", r.Key.Required, r.OnUnknownOutcome, tt.wantRequired, tt.wantPolicy)
			}
		})
	}
}

// TestLoad uses the process environment, so it does not run in parallel.
func TestLoad(t *testing.T) {
	t.Setenv("TICKETS_TOKEN", "s3cr3t-from-env")
	cfg, err := Load("testdata/contract.good.yml")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Upstreams["tickets"].Headers.Header().Get("Authorization"); got != "Bearer s3cr3t-from-env" {
		t.Errorf("Authorization = %q", got)
	}

	_, err = Load("testdata/upstreams.bad.yml")
	if err == nil || !strings.HasPrefix(err.Error(), "testdata/upstreams.bad.yml: ") {
		t.Errorf("Load: error %v does not name the path", err)
	}

	_, err = Load("testdata/missing.yml")
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want os.ErrNotExist", err)
	}
}

func TestParseDocuments(t *testing.T) {
	t.Parallel()
	const file = "upstreams: {u: {url: 'http://u'}}\nroutes: [{name: r, upstream: u, method: GET, path: /, class: read_only}]\n"
	tests := []struct {
		name, data, wantErr string
	}{
		{name: "one document", data: file},
		{name: "explicit start and end", data: "---\n" + file + "...\n"},
		{name: "trailing document marker", data: file + "---\n"},
		{name: "trailing comment-only document", data: file + "---\n# nothing\n"},
		{name: "second document", data: file + "---\nroutes: []\n", wantErr: "t.yaml:3: a routes file holds one YAML document; found a second"},
		{name: "broken second document", data: file + "---\n[\n", wantErr: "t.yaml:4: did not find expected node content"},
		{name: "null", data: "~", wantErr: "t.yaml: routes: at least one route is required"},
		{name: "list", data: "[]", wantErr: "t.yaml:1: cannot unmarshal !!seq into a mapping"},
		{name: "scalar", data: "5", wantErr: "t.yaml:1: cannot unmarshal !!int `5` into a mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("t.yaml", []byte(tt.data), nil)
			var got string
			if err != nil {
				got = err.Error()
			}
			if got != tt.wantErr {
				t.Errorf("Parse: %q, want %q", got, tt.wantErr)
			}
		})
	}
}
