package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Results of a mutant.
const (
	caught   = "caught"   // a target failed
	survived = "survived" // every target passed: no test sees the behaviour break
	stale    = "stale"    // From does not occur exactly once in File: the row must be rewritten
	invalid  = "invalid"  // the mutated copy does not compile (or a script does not load): proves nothing
)

// result is what running one mutant gave.
type result struct {
	Mutant  Mutant
	Result  string        // caught, survived, stale or invalid
	By      string        // caught: the target that failed; invalid or stale: why
	Elapsed time.Duration // applying the mutant and running its targets
}

// failed reports whether r makes the run fail: anything but caught.
func (r result) failed() bool { return r.Result != caught }

// targets renders a mutant's targets for a table cell: "./gateway ^TestX$; ./e2e ^TestY$".
func targets(ts []Target) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.Pkg + " " + t.Run
	}
	return strings.Join(parts, "; ")
}

// cell escapes s for a Markdown table cell: pipes, and line breaks folded into spaces; s is shown
// as code when code is true.
func cell(s string, code bool) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "|", `\|`)
	if code && s != "" {
		return "`" + s + "`"
	}
	return s
}

// writeResults prints the Markdown table of a run: mutant, behaviour, tests, result, seconds.
func writeResults(w io.Writer, rs []result) {
	fmt.Fprintln(w, "| mutant | behaviour | tests | result | seconds |")
	fmt.Fprintln(w, "|---|---|---|---|---:|")
	for _, r := range rs {
		res := r.Result
		if r.By != "" {
			res += ": " + r.By
		}
		if r.failed() {
			res = "**" + res + "**"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %.0f |\n", cell(r.Mutant.Name, true), cell(r.Mutant.Behaviour, false),
			cell(targets(r.Mutant.Tests), true), cell(res, false), r.Elapsed.Seconds())
	}
}

// writeList prints the Markdown table of the mutants without running them (-list): mutant,
// behaviour, file, tests, and whether From still occurs exactly once in File (status, from check).
func writeList(w io.Writer, ms []Mutant, check func(Mutant) error) {
	fmt.Fprintln(w, "| mutant | behaviour | file | tests | status |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, m := range ms {
		status := "ok"
		if err := check(m); err != nil {
			status = "**" + err.Error() + "**"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", cell(m.Name, true), cell(m.Behaviour, false),
			cell(m.File, true), cell(targets(m.Tests), true), cell(status, false))
	}
}

// summary is the last line of a run: counts by result, and the total time.
func summary(rs []result, total time.Duration) string {
	count := map[string]int{}
	for _, r := range rs {
		count[r.Result]++
	}
	return fmt.Sprintf("%d mutants: %d caught, %d survived, %d stale, %d invalid; %s",
		len(rs), count[caught], count[survived], count[stale], count[invalid], total.Round(time.Second))
}
