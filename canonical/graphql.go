package canonical

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/lexer"
	gqlparser "github.com/vektah/gqlparser/v2/parser"
)

// graphqlBody reads a GraphQL-over-HTTP request (a JSON object with "query", "operationName",
// "variables" and "extensions") as its body part {"document":D,"operationName":N,"variables":V}
// (see Document). Its JSON values and the tokens of its document count against budget together.
func graphqlBody(body []byte, budget int, tr *trace) (node, error) {
	v, values, err := parseBounded(body, budget, nil)
	switch {
	case err != nil:
		return node{}, err
	case v.kind == kindArray:
		return node{}, fmt.Errorf("%w: graphql: batches are not supported", ErrInvalidBody)
	case v.kind != kindObject:
		return node{}, fmt.Errorf("%w: graphql: the body is not a GraphQL request object", ErrInvalidBody)
	}
	var query, opName, vars *node
	for i := range v.kids {
		m := &v.kids[i]
		switch m.name {
		case "query":
			query = &m.val
		case "operationName":
			opName = &m.val
		case "variables":
			vars = &m.val
		case "extensions":
			tr.add("/body/extensions", actionExcluded, "graphql: extensions (persisted-query hashes, tracing) never count")
		default:
			if tr != nil {
				tr.add("/body/"+escapeToken(m.name), actionExcluded, "graphql: not a member of a GraphQL request; never counts")
			}
		}
	}
	if query == nil || query.kind != kindString {
		return node{}, fmt.Errorf("%w: graphql: \"query\" is not a string (requests that send only a persisted-query hash are not supported)", ErrInvalidBody)
	}
	src := &ast.Source{Name: "query", Input: query.str}
	if err := countTokens(src, values, budget); err != nil {
		return node{}, err
	}
	doc, err := gqlparser.ParseQuery(src)
	if err != nil {
		var ge *gqlerror.Error
		if errors.As(err, &ge) && len(ge.Locations) > 0 {
			return node{}, fmt.Errorf("%w: graphql: invalid document at line %d, column %d: %s", ErrInvalidBody, ge.Locations[0].Line, ge.Locations[0].Column, ge.Message)
		}
		return node{}, fmt.Errorf("%w: graphql: invalid document: %v", ErrInvalidBody, err)
	}
	if len(doc.Operations) == 0 {
		return node{}, fmt.Errorf("%w: graphql: the document has no operation", ErrInvalidBody)
	}
	tr.add("/body/document", actionNormalized, "graphql: the query document, parsed and printed canonically (comments, white space and the order of selections, arguments and variables dropped)")

	name := node{kind: kindNull}
	switch {
	case opName != nil && opName.kind == kindString:
		name = *opName
	case opName != nil && opName.kind != kindNull:
		return node{}, fmt.Errorf("%w: graphql: \"operationName\" is not a string or null", ErrInvalidBody)
	case len(doc.Operations) == 1 && doc.Operations[0].Name != "":
		name = node{kind: kindString, str: doc.Operations[0].Name}
		tr.add("/body/operationName", actionDefaulted, "graphql: absent or null: the name of the document's only operation")
	default:
		tr.add("/body/operationName", actionDefaulted, "graphql: absent or null: null (the operation is anonymous or one of several)")
	}

	variables := node{kind: kindObject}
	switch {
	case vars == nil || vars.kind == kindNull:
		tr.add("/body/variables", actionDefaulted, "graphql: absent or null: counts as {}")
	case vars.kind == kindObject:
		variables = *vars
	default:
		return node{}, fmt.Errorf("%w: graphql: \"variables\" is not an object or null", ErrInvalidBody)
	}

	return node{kind: kindObject, kids: []member{
		{name: "document", val: node{kind: kindString, str: printGraphQL(doc, len(query.str))}},
		{name: "operationName", val: name},
		{name: "variables", val: variables},
	}}, nil
}

// countTokens refuses a document whose tokens, added to the values already counted, are more than
// budget, before it is parsed: its syntax tree costs about boundGraphQLPerToken bytes a token
// (MemoryBound). A document that does not lex is left to the parser, which says where.
func countTokens(src *ast.Source, values, budget int) error {
	lex := lexer.New(src)
	for n := values; ; n++ {
		tok, err := lex.ReadToken()
		if err != nil || tok.Kind == lexer.EOF {
			return nil
		}
		if n >= budget {
			return fmt.Errorf("%w: more than %d values and document tokens", ErrBodyTooComplex, budget)
		}
	}
}

// printGraphQL prints a parsed GraphQL executable document canonically: its definitions sorted
// by their text and separated by one space, each printed by gqlPrinter. The canonical text is
// about as long as the source of n bytes, so each printer starts with its share of n, and the
// result is written once at its exact size (docs/fingerprint.md#bounds).
func printGraphQL(doc *ast.QueryDocument, n int) string {
	count := len(doc.Operations) + len(doc.Fragments)
	defs := make([][]byte, 0, count)
	for _, op := range doc.Operations {
		p := gqlPrinter{b: make([]byte, 0, n/count)}
		p.operation(op)
		defs = append(defs, p.b)
	}
	for _, f := range doc.Fragments {
		p := gqlPrinter{b: make([]byte, 0, n/count)}
		p.fragment(f)
		defs = append(defs, p.b)
	}
	slices.SortFunc(defs, bytes.Compare)
	var out strings.Builder
	out.Grow(count - 1 + sumLen(defs))
	for i, d := range defs {
		if i > 0 {
			out.WriteByte(' ')
		}
		out.Write(d)
	}
	return out.String()
}

func sumLen(defs [][]byte) (n int) {
	for _, d := range defs {
		n += len(d)
	}
	return n
}

// gqlPrinter writes the canonical text of GraphQL definitions: no comments or descriptions, no
// insignificant white space or commas (one space between selections and before directives),
// arguments, variable definitions and input object fields sorted by name, selections sorted
// by gqlSelection order, and strings written with JSON's escapes. Everything else is kept as
// parsed, including the text of numbers and the order of directives and list values.
type gqlPrinter struct {
	b []byte
}

func (p *gqlPrinter) operation(op *ast.OperationDefinition) {
	p.b = append(p.b, op.Operation...)
	if op.Name != "" {
		p.b = append(p.b, ' ')
		p.b = append(p.b, op.Name...)
	}
	p.variableDefinitions(op.VariableDefinitions)
	p.directives(op.Directives)
	p.selectionSet(canonSelections(op.SelectionSet))
}

func (p *gqlPrinter) fragment(f *ast.FragmentDefinition) {
	p.b = append(p.b, "fragment "...)
	p.b = append(p.b, f.Name...)
	p.variableDefinitions(f.VariableDefinition)
	p.b = append(p.b, " on "...)
	p.b = append(p.b, f.TypeCondition...)
	p.directives(f.Directives)
	p.selectionSet(canonSelections(f.SelectionSet))
}

func (p *gqlPrinter) variableDefinitions(defs ast.VariableDefinitionList) {
	if len(defs) == 0 {
		return
	}
	defs = slices.Clone(defs)
	slices.SortStableFunc(defs, func(a, b *ast.VariableDefinition) int { return strings.Compare(a.Variable, b.Variable) })
	p.b = append(p.b, '(')
	for i, d := range defs {
		if i > 0 {
			p.b = append(p.b, ',')
		}
		p.b = append(p.b, '$')
		p.b = append(p.b, d.Variable...)
		p.b = append(p.b, ':')
		p.typeRef(d.Type)
		if d.DefaultValue != nil {
			p.b = append(p.b, '=')
			p.value(d.DefaultValue)
		}
		p.directives(d.Directives)
	}
	p.b = append(p.b, ')')
}

func (p *gqlPrinter) typeRef(t *ast.Type) {
	if t == nil {
		return
	}
	if t.NamedType != "" {
		p.b = append(p.b, t.NamedType...)
	} else {
		p.b = append(p.b, '[')
		p.typeRef(t.Elem)
		p.b = append(p.b, ']')
	}
	if t.NonNull {
		p.b = append(p.b, '!')
	}
}

func (p *gqlPrinter) directives(ds ast.DirectiveList) {
	for _, d := range ds {
		p.b = append(p.b, " @"...)
		p.b = append(p.b, d.Name...)
		p.arguments(d.Arguments)
	}
}

func (p *gqlPrinter) arguments(args ast.ArgumentList) {
	if len(args) == 0 {
		return
	}
	args = slices.Clone(args)
	slices.SortStableFunc(args, func(a, b *ast.Argument) int { return strings.Compare(a.Name, b.Name) })
	p.b = append(p.b, '(')
	for i, a := range args {
		if i > 0 {
			p.b = append(p.b, ',')
		}
		p.b = append(p.b, a.Name...)
		p.b = append(p.b, ':')
		p.value(a.Value)
	}
	p.b = append(p.b, ')')
}

func (p *gqlPrinter) value(v *ast.Value) {
	if v == nil {
		p.b = append(p.b, "null"...)
		return
	}
	switch v.Kind {
	case ast.Variable:
		p.b = append(p.b, '$')
		p.b = append(p.b, v.Raw...)
	case ast.StringValue, ast.BlockValue:
		p.b = appendString(p.b, v.Raw) // JSON's escapes are GraphQL's; a block string is a string
	case ast.ListValue:
		p.b = append(p.b, '[')
		for i, c := range v.Children {
			if i > 0 {
				p.b = append(p.b, ',')
			}
			p.value(c.Value)
		}
		p.b = append(p.b, ']')
	case ast.ObjectValue:
		kids := slices.Clone(v.Children)
		slices.SortStableFunc(kids, func(a, b *ast.ChildValue) int { return strings.Compare(a.Name, b.Name) })
		p.b = append(p.b, '{')
		for i, c := range kids {
			if i > 0 {
				p.b = append(p.b, ',')
			}
			p.b = append(p.b, c.Name...)
			p.b = append(p.b, ':')
			p.value(c.Value)
		}
		p.b = append(p.b, '}')
	default: // Int, Float, Boolean, Null, Enum: as written
		p.b = append(p.b, v.Raw...)
	}
}

// gqlSelection is one selection of a selection set, ready to be sorted and printed.
type gqlSelection struct {
	key  string // the response name of a field, "..." + name of a spread, "... on T" of an inline fragment
	head []byte // the canonical text before the selection set
	kids []*gqlSelection
	sum  [sha256.Size]byte // of head and the kids' sums: equal exactly when the printed texts are
}

// canonSelections returns the selections of set sorted by key, then head, then sum (so fields
// by response name, then arguments and directives), without repeated identical selections. It
// prints every head once and hashes the subtrees, so its cost is linear in the document's size
// however deep the selection sets nest.
func canonSelections(set ast.SelectionSet) []*gqlSelection {
	out := make([]*gqlSelection, 0, len(set))
	slab := make([]gqlSelection, len(set)) // one allocation for the set, not one per selection
	var hashed []byte                      // what each sum is of, reused
	for i, s := range set {
		var (
			g   = &slab[i]
			p   gqlPrinter
			sub ast.SelectionSet
		)
		switch s := s.(type) {
		case *ast.Field:
			g.key = cmp.Or(s.Alias, s.Name)
			if g.key != s.Name {
				p.b = append(p.b, g.key...)
				p.b = append(p.b, ':')
			}
			p.b = append(p.b, s.Name...)
			p.arguments(s.Arguments)
			p.directives(s.Directives)
			sub = s.SelectionSet
		case *ast.FragmentSpread:
			g.key = "..." + s.Name
			p.b = append(p.b, g.key...)
			p.directives(s.Directives)
		case *ast.InlineFragment:
			g.key = "..."
			if s.TypeCondition != "" {
				g.key += " on " + s.TypeCondition
			}
			p.b = append(p.b, g.key...)
			p.directives(s.Directives)
			sub = s.SelectionSet
		default:
			continue
		}
		g.head = p.b
		if len(sub) > 0 {
			g.kids = canonSelections(sub)
		}
		hashed = binary.AppendUvarint(hashed[:0], uint64(len(g.head)))
		hashed = append(hashed, g.head...)
		hashed = binary.AppendUvarint(hashed, uint64(len(g.kids)))
		for _, k := range g.kids {
			hashed = append(hashed, k.sum[:]...)
		}
		g.sum = sha256.Sum256(hashed)
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b *gqlSelection) int {
		return cmp.Or(strings.Compare(a.key, b.key), bytes.Compare(a.head, b.head), bytes.Compare(a.sum[:], b.sum[:]))
	})
	return slices.CompactFunc(out, func(a, b *gqlSelection) bool { return a.sum == b.sum })
}

// selectionSet prints sorted selections as {a b c}.
func (p *gqlPrinter) selectionSet(sels []*gqlSelection) {
	p.b = append(p.b, '{')
	for i, s := range sels {
		if i > 0 {
			p.b = append(p.b, ' ')
		}
		p.b = append(p.b, s.head...)
		if len(s.kids) > 0 {
			p.selectionSet(s.kids)
		}
	}
	p.b = append(p.b, '}')
}
