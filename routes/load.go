package routes

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Load reads the routes file at path and returns Parse's result, with os.LookupEnv for ${VAR}.
// Problems in the file are reported as Errors, each naming path; a file that cannot be read is
// an error that wraps the os error (errors.Is(err, fs.ErrNotExist) works).
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read routes file: %w", err)
	}
	return Parse(path, data, os.LookupEnv)
}

// Parse decodes, resolves and validates a routes file (docs/contract.md §2). name is the file's name, used
// in messages only; lookupEnv reads the ${VAR} references of upstream headers (os.LookupEnv in
// production; nil means no variable is set).
//
// Decoding is strict: an unknown field, a value of the wrong type, a duplicated mapping key or a
// second YAML document is an error, reported with its line (a "---" followed by nothing is not a
// document). When the file decodes, or its only faults are unknown fields (a misspelt name, which
// leaves nothing half set), every field is validated and every problem reported with its field
// path, not only the first. The error is always of type Errors, whose elements are
// *FieldError. An empty file decodes, and fails validation: it has no route.
//
// A route field takes its value from the route, else from the defaults block, else from the
// Default constants. On read_only routes the fields that only matter to the store (key,
// fingerprint, receipt, on_unknown_outcome, outcome, ttl, lock_lease, concurrency, wait_timeout)
// are errors when set on the route; the defaults block may still set them for the other routes.
// A kind: mcp route's tools take each of these settings from the tool, else from the route
// (docs/configuration.md#kind-mcp).
func Parse(name string, data []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	raw, unknown, err := decode(name, data)
	if err != nil {
		return nil, err
	}
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	r := resolver{file: name, lookupEnv: lookupEnv, errs: unknown}
	cfg := r.config(raw)
	if len(r.errs) > 0 {
		return nil, r.errs
	}
	return cfg, nil
}

// rawFile is the routes file as written; pointers tell an unset field from a zero one.
type rawFile struct {
	Upstreams map[string]rawUpstream `yaml:"upstreams"`
	Defaults  rawSettings            `yaml:"defaults"`
	Routes    []rawRoute             `yaml:"routes"`
	Clients   *rawClients            `yaml:"clients"`
}

type rawUpstream struct {
	URL         string            `yaml:"url"`
	Timeout     *time.Duration    `yaml:"timeout"`
	StripPrefix string            `yaml:"strip_prefix"`
	Headers     map[string]string `yaml:"headers"`
	ForwardKey  string            `yaml:"forward_key"`
	MCP         *rawUpstreamMCP   `yaml:"mcp"`
}

type rawUpstreamMCP struct {
	DiscoverTools     bool           `yaml:"discover_tools"`
	TrustAnnotations  bool           `yaml:"trust_annotations"`
	ToolsTTL          *time.Duration `yaml:"tools_ttl"`
	StreamIdleTimeout *time.Duration `yaml:"stream_idle_timeout"`
}

// rawSettings are the fields of the defaults block, which a route may set too.
type rawSettings struct {
	TTL            *time.Duration `yaml:"ttl"`
	UnknownTTL     *time.Duration `yaml:"unknown_ttl"`
	LockLease      *time.Duration `yaml:"lock_lease"`
	Concurrency    *string        `yaml:"concurrency"`
	WaitTimeout    *time.Duration `yaml:"wait_timeout"`
	TenantHeader   *string        `yaml:"tenant_header"`
	TenantRequired *bool          `yaml:"tenant_required"`
	ActorHeader    *string        `yaml:"actor_header"`
	MaxBodyBytes   *int64         `yaml:"max_body_bytes"`
}

type rawRoute struct {
	Name             string             `yaml:"name"`
	Kind             string             `yaml:"kind"`
	Upstream         string             `yaml:"upstream"`
	Method           string             `yaml:"method"`
	Path             string             `yaml:"path"`
	OpaquePathParams []string           `yaml:"opaque_path_params"`
	Class            string             `yaml:"class"`
	Upgrade          string             `yaml:"upgrade"`
	Refusal          *string            `yaml:"refusal"`
	Cancel           *string            `yaml:"cancel"`
	UnknownTools     *string            `yaml:"unknown_tools"`
	ReplayMeta       *bool              `yaml:"replay_meta"`
	Tools            map[string]rawTool `yaml:"tools"`
	rawEffect        `yaml:",inline"`
}

// rawEffect are the effect settings of a route, which a tool of a kind: mcp route may set too.
type rawEffect struct {
	Key              *rawKey         `yaml:"key"`
	Fingerprint      *rawFingerprint `yaml:"fingerprint"`
	Receipt          *rawReceipt     `yaml:"receipt"`
	OnUnknownOutcome *string         `yaml:"on_unknown_outcome"`
	Outcome          *rawOutcome     `yaml:"outcome"`
	Reconcile        *rawReconcile   `yaml:"reconcile"`
	Scope            *rawScope       `yaml:"scope"`
	rawSettings      `yaml:",inline"`
}

// rawTool is one entry of a kind: mcp route's tools.
type rawTool struct {
	Class      string      `yaml:"class"`
	ToolError  *string     `yaml:"tool_error"`
	ErrorCodes *rawOutcome `yaml:"error_codes"`
	rawEffect  `yaml:",inline"`
}

type rawScope struct {
	Credential       bool   `yaml:"credential"`
	CredentialHeader string `yaml:"credential_header"`
}

type rawReconcile struct {
	Inject    *rawInject     `yaml:"inject"`
	Path      string         `yaml:"path"`
	Found     string         `yaml:"found"`
	RemoteID  string         `yaml:"remote_id"`
	RemoteURL string         `yaml:"remote_url"`
	Status    int            `yaml:"status"`
	After     *time.Duration `yaml:"after"`
}

type rawInject struct {
	BodyPointer string `yaml:"body_pointer"`
	Value       string `yaml:"value"`
}

type rawKey struct {
	Header   *string `yaml:"header"`
	Meta     *string `yaml:"meta"`
	Argument *string `yaml:"argument"`
	Required *bool   `yaml:"required"`
	From     *string `yaml:"from"`
	Derive   *string `yaml:"derive"`
}

type rawFingerprint struct {
	Body    *rawBody `yaml:"body"`
	Query   []string `yaml:"query"`
	Headers []string `yaml:"headers"`
}

type rawBody struct {
	Include   []string             `yaml:"include"`
	Exclude   []string             `yaml:"exclude"`
	Sets      []string             `yaml:"sets"`
	Defaults  map[string]yaml.Node `yaml:"defaults"` // converted to JSON by yamlToJSON
	Normalize map[string][]string  `yaml:"normalize"`
	Format    string               `yaml:"format"`
}

type rawReceipt struct {
	RemoteID      string   `yaml:"remote_id"`
	RemoteURL     string   `yaml:"remote_url"`
	ReplayHeaders []string `yaml:"replay_headers"`
}

type rawOutcome struct {
	Committed    []int         `yaml:"committed"`
	NotCommitted []int         `yaml:"not_committed"`
	Unknown      []int         `yaml:"unknown"`
	ErrorCodes   *rawOutcome   `yaml:"error_codes"` // outcome of a format: jsonrpc route only
	Body         []rawBodyRule `yaml:"body"`        // outcome of a kind: http route only
}

// rawBodyRule is one of outcome.body: a pointer, what its value must be (equals) or whether it is
// there (present), and the class of an answer it matches.
type rawBodyRule struct {
	Pointer string    `yaml:"pointer"`
	Equals  yaml.Node `yaml:"equals"` // a Node, so that equals: null is told from no equals
	Present *bool     `yaml:"present"`
	Class   string    `yaml:"class"`
}

// decode decodes data strictly into a rawFile. Its errors are Errors of *FieldError with the line
// yaml.v3 gives. Unknown fields alone are returned apart, with the rest of the file decoded: yaml.v3
// skips them and decodes every other field, so the file can still be validated.
func decode(name string, data []byte) (raw *rawFile, unknown Errors, err error) {
	raw = new(rawFile)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err = dec.Decode(raw)
	if errors.Is(err, io.EOF) {
		return raw, nil, nil // an empty file; validation reports what is missing
	}
	if err != nil {
		errs, onlyUnknown := yamlErrors(name, err)
		if !onlyUnknown {
			return nil, nil, errs
		}
		unknown = errs
	}
	for {
		var extra yaml.Node
		err := dec.Decode(&extra)
		switch {
		case errors.Is(err, io.EOF):
			return raw, unknown, nil
		case err != nil:
			errs, _ := yamlErrors(name, err)
			return nil, nil, errs
		case len(extra.Content) == 1 && extra.Content[0].ShortTag() == "!!null":
			continue // a "---" with nothing after it
		}
		return nil, nil, append(unknown, &FieldError{File: name, Line: extra.Line, Err: errors.New("a routes file holds one YAML document; found a second")})
	}
}

var (
	// yamlLine matches the "line N: " that yaml.v3 puts before its messages.
	yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	// yamlUnknownField matches yaml.v3's message for an unknown field under KnownFields.
	yamlUnknownField = regexp.MustCompile(`^field (.+) not found in type \S+$`)
	// yamlInto matches yaml.v3's message for a value of the wrong type.
	yamlInto = regexp.MustCompile(`^(cannot unmarshal .*) into (\S+)$`)
)

// yamlTypeName names a Go type of yaml.v3's messages in the words of the file.
func yamlTypeName(t string) string {
	switch t {
	case "time.Duration":
		return `a duration ("30s")`
	case "bool":
		return "a boolean"
	case "int", "int64":
		return "an integer"
	case "string":
		return "a string"
	case "[]string":
		return "a list of strings"
	case "[]int":
		return "a list of integers"
	}
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["), strings.HasPrefix(t, "routes."):
		return "a mapping"
	}
	return t
}

// yamlErrors turns an error of yaml.v3 into Errors, one per problem, with the line in the
// position and the message in the words of the file; onlyUnknown reports that every problem is an
// unknown field, which yaml.v3 skips while it decodes the rest.
func yamlErrors(name string, err error) (errs Errors, onlyUnknown bool) {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	errs = make(Errors, 0, len(msgs))
	onlyUnknown = te != nil // a type error whose every message is an unknown field
	for _, msg := range msgs {
		fe := &FieldError{File: name}
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			fe.Line, _ = strconv.Atoi(m[1])
			msg = m[2]
		} else {
			msg = strings.TrimPrefix(msg, "yaml: ")
		}
		if m := yamlUnknownField.FindStringSubmatch(msg); m != nil {
			msg = fmt.Sprintf("unknown field %q", m[1])
		} else {
			onlyUnknown = false
			if m := yamlInto.FindStringSubmatch(msg); m != nil {
				msg = m[1] + " into " + yamlTypeName(m[2])
			}
		}
		fe.Err = errors.New(msg)
		errs = append(errs, fe)
	}
	return errs, onlyUnknown
}
