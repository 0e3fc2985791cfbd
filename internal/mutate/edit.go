package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// staleError is the error of a mutant whose From no longer occurs exactly once in its File: the
// code moved on, and the row must be rewritten before it proves anything again.
type staleError struct {
	File  string
	Count int // occurrences of From in File
}

func (e *staleError) Error() string {
	if e.Count == 0 {
		return fmt.Sprintf("stale: From does not occur in %s", e.File)
	}
	return fmt.Sprintf("stale: From occurs %d times in %s, want once", e.Count, e.File)
}

// apply returns src with m.From replaced by m.To, or a *staleError unless From occurs exactly once
// in src. An empty From is stale: it would match everywhere.
func apply(m Mutant, src string) (string, error) {
	n := 0
	if m.From != "" {
		n = strings.Count(src, m.From)
	}
	if n != 1 {
		return "", &staleError{File: m.File, Count: n}
	}
	return strings.Replace(src, m.From, m.To, 1), nil
}

// kebab is the form of a mutant's name.
var kebab = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// validate checks the table itself (not the tree): names unique and in kebab case, every row with
// a behaviour, a file, a change and at least one target whose Run compiles.
func validate(ms []Mutant) error {
	seen := map[string]bool{}
	for i, m := range ms {
		switch {
		case !kebab.MatchString(m.Name):
			return fmt.Errorf("mutants[%d]: name %q is not kebab-case", i, m.Name)
		case seen[m.Name]:
			return fmt.Errorf("mutants[%d]: name %q used twice", i, m.Name)
		case m.Behaviour == "" || m.File == "" || m.From == "":
			return fmt.Errorf("mutant %s: Behaviour, File and From are required", m.Name)
		case m.From == m.To:
			return fmt.Errorf("mutant %s: To equals From", m.Name)
		case len(m.Tests) == 0:
			return fmt.Errorf("mutant %s: no Tests", m.Name)
		case m.Core && slices.ContainsFunc(m.Tests, func(t Target) bool { return t.Pkg == "./e2e" }):
			return fmt.Errorf("mutant %s: a core row's targets are unit tests, not ./e2e (make mutate's time)", m.Name)
		}
		seen[m.Name] = true
		for _, t := range m.Tests {
			if !strings.HasPrefix(t.Pkg, "./") || t.Run == "" {
				return fmt.Errorf("mutant %s: target %+v: Pkg must start with ./ and Run must be set", m.Name, t)
			}
			for _, part := range strings.Split(t.Run, "/") {
				if _, err := regexp.Compile(part); err != nil {
					return fmt.Errorf("mutant %s: target %+v: %v", m.Name, t, err)
				}
			}
		}
	}
	return nil
}

// selectMutants returns the mutants whose name matches pattern (every one matches ""), only the
// Core ones when core is set.
func selectMutants(ms []Mutant, pattern string, core bool) ([]Mutant, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("-run: %w", err)
	}
	var out []Mutant
	for _, m := range ms {
		if re.MatchString(m.Name) && (m.Core || !core) {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-run %q matches no mutant (core only: %v)", pattern, core)
	}
	return out, nil
}

// uniqueTargets returns the targets of ms, each once, in order of first use: what the run on the
// unmutated copy must pass.
func uniqueTargets(ms []Mutant) []Target {
	seen := map[Target]bool{}
	var out []Target
	for _, m := range ms {
		for _, t := range m.Tests {
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	return out
}
