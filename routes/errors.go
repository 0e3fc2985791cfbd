package routes

import (
	"strconv"
	"strings"
)

// FieldError is one problem in a routes file. Its Error is
// "<file>[:<line>]: [<field path>: ]<message>", e.g.
//
//	routes.yaml: upstreams.tickets.url: "ftp://x": scheme must be http or https
//	routes.yaml:12: unknown field "tiemout"
//
// The message never holds the value of an upstream header, which may be a credential.
type FieldError struct {
	// File is the file name as given to Parse or Load.
	File string
	// Line is the 1-based line of a YAML syntax or decoding error; 0 for validation problems.
	Line int
	// Field is the path of the field, e.g. `routes[2] "create_ticket": fingerprint.body.include[1]`;
	// empty for YAML syntax and decoding errors.
	Field string
	// Err is the problem; it may wrap the error of another package (canonical.ParsePointer).
	Err error
}

// Error returns "<file>[:<line>]: [<field path>: ]<message>".
func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the underlying problem.
func (e *FieldError) Unwrap() error { return e.Err }

// Errors is every problem found in one routes file, in a stable order: decoding errors by line,
// else validation problems in file order (upstreams sorted by name, then defaults, then
// clients, then routes).
// Parse and Load return it (never empty) as their error; errors.As gets the list, and each element
// is a *FieldError.
type Errors []error

// Error lists the problems one per line.
func (e Errors) Error() string {
	lines := make([]string, len(e))
	for i, err := range e {
		lines[i] = err.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems, for errors.Is and errors.As.
func (e Errors) Unwrap() []error { return e }
