// Command slowest reads the JSON stream of `go test -json` (test2json) on its standard input and
// says where the time of a test run went: each package's time, and the slowest tests (top-level
// tests, whose time includes their subtests). Like `go test` without -v, it prints the output of
// failed tests only; it exits 1 when a test or a package failed, so that it can stand at the end of
// a pipe in a make target (`make slowest`).
//
//	go test -race -count=1 -json ./... | go run ./internal/slowest -n 15
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// event is a line of test2json's output (go doc test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64 // seconds
	Output  string
}

// timing is the time of one test or package.
type timing struct {
	name    string
	elapsed time.Duration
	failed  bool
}

func main() {
	n := flag.Int("n", 15, "how many of the slowest tests to list")
	flag.Parse()
	failed, err := report(os.Stdin, os.Stdout, *n)
	if err != nil {
		fmt.Fprintln(os.Stderr, "slowest:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// report reads test2json events from r and writes to w the output of what failed, the time of each
// package and the n slowest top-level tests. It reports whether anything failed.
func report(r io.Reader, w io.Writer, n int) (failed bool, err error) {
	var packages, tests []timing
	output := map[string]*strings.Builder{} // by package and test, until the test ends
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			fmt.Fprintf(w, "%s\n", line) // not an event: a build error, say
			continue
		}
		id := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			b := output[id]
			if b == nil {
				b = new(strings.Builder)
				output[id] = b
			}
			b.WriteString(e.Output)
		case "pass", "fail", "skip":
			t := timing{name: e.Package, elapsed: time.Duration(e.Elapsed * float64(time.Second)), failed: e.Action == "fail"}
			if e.Test != "" {
				t.name += " " + e.Test
			}
			if t.failed {
				failed = true
				if b := output[id]; b != nil {
					fmt.Fprint(w, b.String())
				}
			}
			delete(output, id)
			switch {
			case e.Test == "":
				packages = append(packages, t)
				fmt.Fprintf(w, "%-4s %s\t%.1fs\n", strings.ToUpper(e.Action[:1])+e.Action[1:], e.Package, e.Elapsed)
			case !strings.Contains(e.Test, "/") && e.Action != "skip":
				tests = append(tests, t)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return failed, err
	}
	fmt.Fprintf(w, "\nPackages by time:\n")
	writeSlowest(w, packages, len(packages))
	fmt.Fprintf(w, "\nThe %d slowest tests:\n", n)
	writeSlowest(w, tests, n)
	return failed, nil
}

// writeSlowest writes the n longest of ts, longest first.
func writeSlowest(w io.Writer, ts []timing, n int) {
	sort.SliceStable(ts, func(i, j int) bool { return ts[i].elapsed > ts[j].elapsed })
	for _, t := range ts[:min(n, len(ts))] {
		mark := ""
		if t.failed {
			mark = "  FAIL"
		}
		fmt.Fprintf(w, "%8.1fs  %s%s\n", t.elapsed.Seconds(), t.name, mark)
	}
}
