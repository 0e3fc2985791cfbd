package canonical

import "errors"

// ErrBodyTooComplex is wrapped by the error about a body that holds more values than the
// budget of Request.MaxValues (docs/fingerprint.md#bounds). It does not match ErrInvalidBody: the
// body may be valid, only too costly to fingerprint. The gateway answers 413 body-too-complex.
var ErrBodyTooComplex = errors.New("body too complex")

// DefaultMaxValues is the value budget of a Request whose MaxValues is 0.
const DefaultMaxValues = 100_000

// Memory bound of one document (docs/fingerprint.md#bounds), measured by TestMemoryBound.
const (
	// boundPerByte covers, per body byte, the parser's copy of the body, the rewritten strings
	// and numbers, the document and the work of the rules.
	boundPerByte = 6
	// boundPerValue covers one value of the tree (a member: name, kind, text and children).
	boundPerValue = 64
	// boundGraphQLPerToken covers one token of a GraphQL document: its parsed syntax tree and
	// its canonical printing.
	boundGraphQLPerToken = 512
	// boundFixed covers what does not grow with the body.
	boundFixed = 64 << 10
)

// MemoryBound returns an upper bound, in bytes, of the memory Document allocates under c for a
// body of bodyLen bytes and a budget of maxValues values (0: DefaultMaxValues): 6 bytes per body
// byte, plus 64 per value (512 per value or token under the graphql format, whose document's
// syntax tree costs that much), plus 64 KiB. A body of n bytes holds at most n/2+1 values or
// tokens, and Document refuses one with more than the budget having built nothing, so the count
// is the smaller of the two (docs/fingerprint.md#bounds). The gateway weighs each body parse by it
// (IDEMGATEWAY_MAX_INFLIGHT_BYTES).
func (c *Canonicalizer) MemoryBound(bodyLen, maxValues int) int64 {
	if maxValues <= 0 {
		maxValues = DefaultMaxValues
	}
	perValue := int64(boundPerValue)
	if c != nil && c.format == FormatGraphQL {
		perValue = boundGraphQLPerToken
	}
	return boundPerByte*int64(bodyLen) + perValue*int64(min(bodyLen/2+1, maxValues)) + boundFixed
}

// selection is the part of a JSON text that include pointers need (Fields.Include): the members
// and elements on the way to each pointer's target, and each target whole. A nil selection
// selects everything.
type selection struct {
	ptrs  []compiledPointer
	depth int // the reference token of ptrs that the children of the current value match
}

// member returns the selection below the object member name: want is false when no pointer
// goes through it, and sub is nil when a pointer names it (it is built whole).
func (s *selection) member(name string) (sub *selection, want bool) {
	if s == nil {
		return nil, true
	}
	return s.child(func(tok string) bool { return tok == name })
}

// element is member for the element i of an array of n.
func (s *selection) element(i, n int) (sub *selection, want bool) {
	if s == nil {
		return nil, true
	}
	return s.child(func(tok string) bool {
		j, ok := arrayIndex(tok, n)
		return ok && j == i
	})
}

func (s *selection) child(match func(tok string) bool) (*selection, bool) {
	var below []compiledPointer // allocated only on a match: most members match nothing
	for _, p := range s.ptrs {
		if !match(p.toks[s.depth]) {
			continue
		}
		if len(p.toks) == s.depth+1 {
			return nil, true
		}
		below = append(below, p)
	}
	if below == nil {
		return nil, false
	}
	return &selection{ptrs: below, depth: s.depth + 1}, true
}
