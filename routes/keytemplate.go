package routes

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/idemgateway/idemgateway/canonical"
	"github.com/idemgateway/idemgateway/record"
)

// Sources of a key template field and of key.from.
const (
	SourceTenant = "tenant" // {tenant}: the request's tenant
	SourcePath   = "path"   // {path:name}: a path parameter
	SourceBody   = "body"   // {body:/pointer}: a member of the JSON body (RFC 6901)
	SourceQuery  = "query"  // {query:name}: the first value of a query parameter
	SourceHeader = "header" // {header:Name}: a request header
	SourceKey    = "key"    // {key}: the gateway's scoped key (reconcile templates only)
)

// KeyTemplate builds the idempotency key of a request that carries none (key.derive), from the
// business operation: e.g. "{tenant}:{body:/incident_id}:create_ticket". Text outside braces is
// literal and may not contain '{' or '}'. Build one with ParseKeyTemplate.
type KeyTemplate struct {
	text   string
	parts  []templatePart
	fields int
	// digest: every key is kept as its digest, valid or not; set on a kind: mcp tool's template with a {body:…} field, whose values are a tool's
	// arguments, which must appear in no key, admin answer or refusal (docs/mcp.md#derived-keys).
	digest bool
}

type templatePart struct {
	literal string // set for literal text
	source  string // else the field's source and name
	name    string
	pointer canonical.Pointer
}

// ParseKeyTemplate parses a key.derive template. Fields are {tenant}, {path:NAME}, {body:/POINTER},
// {query:NAME} and {header:NAME}; at least one field is required.
func ParseKeyTemplate(s string) (*KeyTemplate, error) {
	t, err := ParseTemplate(s)
	switch {
	case err != nil:
		return nil, err
	case t.fields == 0:
		return nil, fmt.Errorf("%q: a template needs at least one {field}", s)
	case slices.ContainsFunc(t.parts, func(p templatePart) bool { return p.source == SourceKey }):
		return nil, fmt.Errorf("%q: {key} is what this template makes", s)
	}
	return t, nil
}

// ParseTemplate parses a template of a reconcile block: the fields of ParseKeyTemplate and {key},
// the gateway's scoped key (ForwardedKey). Text may also stand without fields.
func ParseTemplate(s string) (*KeyTemplate, error) {
	t := &KeyTemplate{text: s}
	rest := s
	fields := 0
	for rest != "" {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			t.parts = append(t.parts, templatePart{literal: rest})
			break
		}
		if rest[open] == '}' {
			return nil, fmt.Errorf("%q: unmatched '}'", s)
		}
		if open > 0 {
			t.parts = append(t.parts, templatePart{literal: rest[:open]})
		}
		end := strings.IndexAny(rest[open+1:], "{}")
		if end < 0 || rest[open+1+end] != '}' {
			return nil, fmt.Errorf("%q: unterminated '{'", s)
		}
		p, err := parseField(rest[open+1 : open+1+end])
		if err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		t.parts = append(t.parts, p)
		fields++
		rest = rest[open+1+end+1:]
	}
	t.fields = fields
	return t, nil
}

// KeySource is where key.from reads a key: Source is SourceBody (Pointer set), SourceQuery or
// SourceHeader (Name set). The zero KeySource is unset.
type KeySource struct {
	Source  string
	Name    string
	Pointer canonical.Pointer
}

// IsZero reports whether ks is unset.
func (ks KeySource) IsZero() bool { return ks.Source == "" }

// String returns ks as written in the routes file.
func (ks KeySource) String() string {
	if ks.IsZero() {
		return ""
	}
	return ks.Source + ":" + ks.Name
}

// ParseKeySource parses key.from: "body:/pointer", "query:NAME" or "header:NAME".
func ParseKeySource(s string) (KeySource, error) {
	p, err := parseField(s)
	switch {
	case err != nil:
		return KeySource{}, fmt.Errorf("%q: %w", s, err)
	case p.source == SourceTenant, p.source == SourceKey, p.source == SourcePath:
		return KeySource{}, fmt.Errorf("%q: want body:/POINTER, query:NAME or header:NAME", s)
	}
	return KeySource{Source: p.source, Name: p.name, Pointer: p.pointer}, nil
}

func parseField(f string) (templatePart, error) {
	if f == SourceTenant || f == SourceKey {
		return templatePart{source: f}, nil
	}
	source, name, ok := strings.Cut(f, ":")
	if !ok || name == "" {
		return templatePart{}, fmt.Errorf("field {%s}: want {tenant}, {key}, {path:NAME}, {body:/POINTER}, {query:NAME} or {header:NAME}", f)
	}
	switch source {
	case SourcePath, SourceQuery, SourceHeader:
		return templatePart{source: source, name: name}, nil
	case SourceBody:
		p, err := canonical.ParsePointer(name)
		if err != nil {
			return templatePart{}, fmt.Errorf("field {%s}: %w", f, err)
		}
		return templatePart{source: source, name: name, pointer: p}, nil
	}
	return templatePart{}, fmt.Errorf("field {%s}: unknown source %q (want tenant, key, path, body, query or header)", f, source)
}

// String returns the template as written.
func (t *KeyTemplate) String() string { return t.text }

// Render builds a key with Expand. A key that would not be a valid idempotency key
// (record.CheckKey: over record.MaxKeyBytes, not printable ASCII, or only spaces), and every key
// of a template that keeps digests (a kind: mcp tool's with a {body:…} field), is replaced by
// "sha256:" and the hex SHA-256 of it, so any business value can name an operation.
func (t *KeyTemplate) Render(lookup func(source, name string, pointer canonical.Pointer) (string, bool)) (string, error) {
	s, err := t.Expand(lookup)
	if err != nil {
		return "", err
	}
	if t.digest {
		return digest(s), nil
	}
	return KeyOrDigest(s), nil
}

// keepDigests makes t keep every key as its digest when it has a {body:…} field (a kind: mcp
// tool's template: its body fields are arguments).
func (t *KeyTemplate) keepDigests() {
	t.digest = slices.ContainsFunc(t.parts, func(p templatePart) bool { return p.source == SourceBody })
}

// Expand fills the template's fields. lookup returns the value of one field (source, name, and for
// body fields the parsed pointer); a field it reports absent or empty is an error naming the field.
func (t *KeyTemplate) Expand(lookup func(source, name string, pointer canonical.Pointer) (string, bool)) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.source == "" {
			b.WriteString(p.literal)
			continue
		}
		v, ok := lookup(p.source, p.name, p.pointer)
		if !ok || v == "" {
			if p.name == "" {
				return "", fmt.Errorf("field {%s} is missing", p.source)
			}
			return "", fmt.Errorf("field {%s:%s} is missing", p.source, p.name)
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

// KeyOrDigest returns k when it is a valid idempotency key (record.CheckKey), else "sha256:" and
// the hex SHA-256 of k.
func KeyOrDigest(k string) string {
	if record.CheckKey(k) == nil {
		return k
	}
	return digest(k)
}

// digest is "sha256:" and the hex SHA-256 of k.
func digest(k string) string {
	sum := sha256.Sum256([]byte(k))
	return "sha256:" + hex.EncodeToString(sum[:])
}
