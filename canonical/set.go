package canonical

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// SetString returns the JSON text data with the string value at p, which must name a member of an
// object (existing or not) or an existing array element (RFC 6901). Numbers keep their exact text;
// member order is not kept (the result is re-encoded). Errors wrap ErrInvalidBody.
func SetString(data []byte, p Pointer, value string) ([]byte, error) {
	if p.IsZero() {
		return nil, fmt.Errorf("%w: no pointer to set", ErrInvalidBody)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidBody, err)
	}
	toks := p.tokens()
	parent := root
	for _, tok := range toks[:len(toks)-1] {
		switch v := parent.(type) {
		case map[string]any:
			parent = v[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return nil, fmt.Errorf("%w: %s: no element %q", ErrInvalidBody, p, tok)
			}
			parent = v[i]
		default:
			parent = nil
		}
		if parent == nil {
			return nil, fmt.Errorf("%w: %s: the parent of the member does not exist", ErrInvalidBody, p)
		}
	}
	last := toks[len(toks)-1]
	switch v := parent.(type) {
	case map[string]any:
		v[last] = value
	case []any:
		i, err := strconv.Atoi(last)
		if err != nil || i < 0 || i >= len(v) {
			return nil, fmt.Errorf("%w: %s: no element %q", ErrInvalidBody, p, last)
		}
		v[i] = value
	default:
		return nil, fmt.Errorf("%w: %s: the parent is not an object or array", ErrInvalidBody, p)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidBody, err)
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}
