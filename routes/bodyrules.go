package routes

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/idemgateway/idemgateway/canonical"
)

// defaults validates fingerprint.body.defaults, a mapping of JSON Pointers to YAML values, and
// returns it as canonical.Default rules sorted by pointer, each value converted to JSON text.
// at is the path of the mapping; each problem is reported at `at["/pointer"]`.
func (r *resolver) defaults(at string, raw map[string]yaml.Node) []canonical.Default {
	if raw == nil {
		return nil
	}
	out := make([]canonical.Default, 0, len(raw))
	for _, s := range slices.Sorted(maps.Keys(raw)) {
		field := fmt.Sprintf("%s[%q]", at, s)
		p, err := canonical.ParsePointer(s)
		if err != nil {
			r.add(field, err)
			continue
		}
		n := raw[s]
		value, err := yamlToJSON(&n, 0)
		if err != nil {
			r.add(field, err)
			continue
		}
		out = append(out, canonical.Default{Pointer: p, Value: value})
	}
	return out
}

// normalizations validates fingerprint.body.normalize, a mapping of JSON Pointers to lists of
// operations, and returns it as canonical.Normalization rules sorted by pointer. at is the path
// of the mapping; each problem is reported at `at["/pointer"]` or `at["/pointer"][i]`.
func (r *resolver) normalizations(at string, raw map[string][]string) []canonical.Normalization {
	if raw == nil {
		return nil
	}
	out := make([]canonical.Normalization, 0, len(raw))
	for _, s := range slices.Sorted(maps.Keys(raw)) {
		field := fmt.Sprintf("%s[%q]", at, s)
		p, err := canonical.ParsePointer(s)
		if err != nil {
			r.add(field, err)
		}
		ops := raw[s]
		if len(ops) == 0 {
			r.addf(field, "no operations (want a list of trim, collapse_space, casefold or nfc)")
		}
		for j, op := range ops {
			if err := canonical.CheckNormalization(op); err != nil {
				r.add(fmt.Sprintf("%s[%d]", field, j), err)
			}
		}
		out = append(out, canonical.Normalization{Pointer: p, Ops: ops})
	}
	return out
}

// maxYAMLDepth bounds the nesting of a default's value, which also stops recursive aliases.
const maxYAMLDepth = 100

// yamlToJSON converts the YAML value n to JSON text: mappings to objects (keys must be scalars
// and unique), sequences to arrays, null, booleans, integers and floats to their JSON forms
// (integers of any size and floats keep their decimal digits; 0x1f, 0o17 and 1_000 are
// rewritten as decimals; .inf and .nan are errors), and every other scalar (strings,
// timestamps, binary) to a JSON string of its text.
func yamlToJSON(n *yaml.Node, depth int) ([]byte, error) {
	if depth > maxYAMLDepth {
		return nil, fmt.Errorf("value nests deeper than %d levels (or holds a recursive alias)", maxYAMLDepth)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return nil, errors.New("value is empty")
		}
		return yamlToJSON(n.Content[0], depth+1)
	case yaml.AliasNode:
		return yamlToJSON(n.Alias, depth+1)
	case yaml.SequenceNode:
		b := []byte{'['}
		for i, c := range n.Content {
			if i > 0 {
				b = append(b, ',')
			}
			v, err := yamlToJSON(c, depth+1)
			if err != nil {
				return nil, err
			}
			b = append(b, v...)
		}
		return append(b, ']'), nil
	case yaml.MappingNode:
		b := []byte{'{'}
		seen := make(map[string]bool, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
				return nil, fmt.Errorf("line %d: a mapping key must be a scalar (merge keys are not supported)", k.Line)
			}
			if seen[k.Value] {
				return nil, fmt.Errorf("line %d: duplicate mapping key %q", k.Line, k.Value)
			}
			seen[k.Value] = true
			if i > 0 {
				b = append(b, ',')
			}
			name, _ := json.Marshal(k.Value)
			b = append(b, name...)
			b = append(b, ':')
			val, err := yamlToJSON(v, depth+1)
			if err != nil {
				return nil, err
			}
			b = append(b, val...)
		}
		return append(b, '}'), nil
	case yaml.ScalarNode:
		return yamlScalarToJSON(n)
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}

// yamlScalarToJSON converts one YAML scalar to JSON text (see yamlToJSON).
func yamlScalarToJSON(n *yaml.Node) ([]byte, error) {
	switch n.ShortTag() {
	case "!!null":
		return []byte("null"), nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return strconv.AppendBool(nil, b), nil
	case "!!int":
		if isJSONNumber(n.Value) {
			return []byte(n.Value), nil
		}
		var i big.Int
		if _, ok := i.SetString(strings.TrimPrefix(n.Value, "+"), 0); !ok {
			return nil, fmt.Errorf("line %d: %q: integer cannot be written as JSON", n.Line, n.Value)
		}
		return i.Append(nil, 10), nil
	case "!!float":
		if isJSONNumber(n.Value) {
			return []byte(n.Value), nil
		}
		f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
		if err != nil || f-f != 0 { // NaN and ±Inf have no JSON form
			return nil, fmt.Errorf("line %d: %q: number cannot be written as JSON", n.Line, n.Value)
		}
		return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
	}
	return json.Marshal(n.Value) // strings, timestamps, binary and other tags: the text
}

// isJSONNumber reports whether s is a number in JSON's grammar (RFC 8259 §6).
func isJSONNumber(s string) bool {
	return s != "" && (s[0] == '-' || '0' <= s[0] && s[0] <= '9') && json.Valid([]byte(s))
}
