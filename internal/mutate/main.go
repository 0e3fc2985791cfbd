// Command mutate is the mutation check of the core (make mutate, docs/contributing.md): it copies
// the repository's tree once into a throwaway directory, and for each mutant of mutants.go applies
// its one edit there (From, which must occur exactly once in File, becomes To), runs the tests that
// should catch it, and restores the file. It prints a Markdown table, one row a mutant:
//
//	caught    a target failed: some test sees the behaviour break
//	survived  every target passed: no named test guards the behaviour
//	stale     From does not occur exactly once in File: rewrite the row
//	invalid   the mutated copy does not build, or a Lua script does not load: it proves nothing
//
// and exits 1 unless every mutant was caught. Before any mutant, the targets must pass on the
// unmutated copy (a test that fails without a mutant catches nothing); else it stops with 2.
//
// Each target is `go test -race -count=1 -timeout T -run RUN PKG`, run in the copy with
// E2E_MODULE_ROOT set to it, so that the e2e tests build the binaries from the mutated tree.
// With -core, only the rows marked Core run: the tier of make mutate (under ten minutes on two
// cores); without it, every row (make mutate-all).
//
//	go run ./internal/mutate [-core] [-run REGEXP] [-list] [-timeout 10m] [-v]
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags.
type options struct {
	run     string
	core    bool
	list    bool
	timeout time.Duration
	verbose bool
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mutate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.run, "run", "", "run only the mutants whose name matches this regexp")
	fs.BoolVar(&o.core, "core", false, "run only the mutants of the core promises (the rows marked Core)")
	fs.BoolVar(&o.list, "list", false, "print the table of mutants, and whether each still applies, without running them")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "go test -timeout of each target")
	fs.BoolVar(&o.verbose, "v", false, "stream the output of every go command to stderr")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := validate(mutants); err != nil {
		fmt.Fprintln(stderr, "mutate: the table is wrong:", err)
		return 2
	}
	ms, err := selectMutants(mutants, o.run, o.core)
	if err != nil {
		fmt.Fprintln(stderr, "mutate:", err)
		return 2
	}
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintln(stderr, "mutate:", err)
		return 2
	}
	if o.list {
		writeList(stdout, ms, func(m Mutant) error { return checkFile(root, m) })
		return 0
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := &driver{ctx: ctx, opts: o, log: stderr}
	rs, err := d.runAll(root, ms)
	if err != nil {
		fmt.Fprintln(stderr, "mutate:", err)
		return 2
	}
	writeResults(stdout, rs)
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, summary(rs, d.total))
	for _, r := range rs {
		if r.failed() {
			return 1
		}
	}
	return 0
}

// repoRoot is the top of the git work tree the command runs in.
func repoRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("not in a git work tree (git rev-parse --show-toplevel: %v)", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// checkFile reports whether m applies to its file under root: nil, a *staleError, or a read error.
func checkFile(root string, m Mutant) error {
	src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(m.File)))
	if err != nil {
		return &staleError{File: m.File}
	}
	_, err = apply(m, string(src))
	return err
}

// driver runs mutants in one copy of the tree.
type driver struct {
	ctx   context.Context
	opts  options
	log   io.Writer
	dir   string        // the copy
	total time.Duration // the whole run, the copy and the unmutated run included
}

// runAll copies the tree under root, checks that the targets of ms pass unmutated, and runs every
// mutant. An error means the run itself could not be made (no copy, a target failing unmutated).
func (d *driver) runAll(root string, ms []Mutant) ([]result, error) {
	start := time.Now()
	defer func() { d.total = time.Since(start) }()
	dir, err := os.MkdirTemp("", "idemgateway-mutate-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	d.dir = dir
	n, err := copyTree(root, dir)
	if err != nil {
		return nil, fmt.Errorf("copying the tree: %w", err)
	}
	d.logf("copied %d files of %s to %s", n, root, dir)

	// The unmutated copy: it builds, and every target passes.
	if out, err := d.build("./..."); err != nil {
		return nil, fmt.Errorf("the unmutated copy does not build: %v\n%s", err, out)
	}
	for _, t := range groupTargets(uniqueTargets(ms)) {
		t0 := time.Now()
		passed, out, err := d.test(t)
		if err != nil {
			return nil, err
		}
		if !passed {
			return nil, fmt.Errorf("%s %s fails without a mutant, so it catches nothing: fix the test first\n%s", t.Pkg, t.Run, tail(out, 60))
		}
		d.logf("unmutated: %s %s passes (%s)", t.Pkg, t.Run, time.Since(t0).Round(time.Second))
	}

	var rs []result
	for i, m := range ms {
		r := d.runOne(m)
		if d.ctx.Err() != nil {
			return nil, fmt.Errorf("interrupted during mutant %s", m.Name)
		}
		d.logf("[%d/%d] %s: %s %s (%s)", i+1, len(ms), m.Name, r.Result, r.By, r.Elapsed.Round(time.Second))
		rs = append(rs, r)
	}
	return rs, nil
}

// runOne applies m in the copy, runs its targets until one fails, and restores the file.
func (d *driver) runOne(m Mutant) (r result) {
	start := time.Now()
	r.Mutant = m
	defer func() { r.Elapsed = time.Since(start) }()
	path := filepath.Join(d.dir, filepath.FromSlash(m.File))
	orig, err := os.ReadFile(path)
	if err != nil {
		r.Result, r.By = stale, fmt.Sprintf("%s is not in the tree", m.File)
		return r
	}
	mutated, err := apply(m, string(orig))
	if err != nil {
		r.Result, r.By = stale, err.Error()
		return r
	}
	info, err := os.Stat(path)
	if err != nil {
		r.Result, r.By = invalid, err.Error()
		return r
	}
	if err := os.WriteFile(path, []byte(mutated), info.Mode().Perm()); err != nil {
		r.Result, r.By = invalid, err.Error()
		return r
	}
	defer func() {
		if err := os.WriteFile(path, orig, info.Mode().Perm()); err != nil {
			// Every later mutant would run on a wrong tree.
			panic(fmt.Sprintf("mutate: restoring %s: %v", path, err))
		}
	}()

	if out, err := d.build(packageOf(d.dir, m.File)); err != nil {
		r.Result, r.By = invalid, "does not build: "+firstLines(out, 3)
		return r
	}
	for _, t := range m.Tests {
		passed, out, err := d.test(t)
		switch {
		case err != nil:
			r.Result, r.By = invalid, err.Error()
			return r
		case brokenOutput(out) != "":
			r.Result, r.By = invalid, fmt.Sprintf("%s %s: %s", t.Pkg, t.Run, brokenOutput(out))
			return r
		case !passed:
			r.Result, r.By = caught, "by "+t.Pkg+" "+t.Run
			return r
		}
	}
	r.Result = survived
	return r
}

// build compiles pkg ("./...": every package) in the copy, with -race as the tests do (so that
// the tests reuse what it compiled).
func (d *driver) build(pkg string) (string, error) {
	return d.goCmd(10*time.Minute, "build", "-race", pkg)
}

// packageOf is the package that holds file (a path from the root of the tree at dir) or, for a
// file that is no Go source (a Lua script), embeds it: the nearest directory up from it with Go
// files. Building it is what a mutant of file can break; the packages that import it do not see
// the edit but through its exported API, which no mutant changes.
func packageOf(dir, file string) string {
	rel := filepath.Dir(filepath.FromSlash(file))
	for rel != "." {
		if gofiles, _ := filepath.Glob(filepath.Join(dir, rel, "*.go")); len(gofiles) > 0 {
			break
		}
		rel = filepath.Dir(rel)
	}
	return "./" + filepath.ToSlash(rel)
}

// test runs target t in the copy; passed is go test's exit status 0. err is for a go command that
// could not run at all.
func (d *driver) test(t Target) (passed bool, out string, err error) {
	out, err = d.goCmd(d.opts.timeout+2*time.Minute,
		"test", "-race", "-count=1", "-timeout", d.opts.timeout.String(), "-run", t.Run, t.Pkg)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true, out, nil
	case errors.As(err, &exit):
		return false, out, nil
	default:
		return false, out, fmt.Errorf("go test %s: %w", t.Pkg, err)
	}
}

// goCmd runs the go command with args in the copy, bounded by limit, and returns its combined
// output. The e2e tests build their binaries from E2E_MODULE_ROOT: the copy.
func (d *driver) goCmd(limit time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(d.ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = d.dir
	cmd.Env = append(os.Environ(), "E2E_MODULE_ROOT="+d.dir)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if d.opts.verbose {
		w := io.MultiWriter(&buf, d.log)
		cmd.Stdout, cmd.Stderr = w, w
		d.logf("go %s", strings.Join(args, " "))
	}
	killGroup(cmd) // the test binaries and the servers they start go too
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	return buf.String(), err
}

func (d *driver) logf(format string, args ...any) {
	fmt.Fprintf(d.log, "mutate: "+format+"\n", args...)
}

// brokenOutput names what in a go test output shows a mutant that does not run at all: a test
// package that does not compile, or a Lua script that Redis refuses to load. "" when none.
func brokenOutput(out string) string {
	for _, s := range []string{"[build failed]", "[setup failed]", "Error compiling script"} {
		if strings.Contains(out, s) {
			return s
		}
	}
	return ""
}

// groupTargets merges targets for the unmutated run, one go test where several would do: the
// targets of one package whose Run has one level ("^TestA$", "^TestB$" give "^TestA$|^TestB$"),
// and those with two levels under the same test ("^TestS$/^A$", "^TestS$/^B$" give
// "^TestS$/^A$|^B$"). Deeper ones run alone.
func groupTargets(ts []Target) []Target {
	var out []Target
	at := map[string]int{} // package and first level -> index in out of the merged target
	for _, t := range ts {
		levels := strings.Split(t.Run, "/")
		if len(levels) > 2 {
			out = append(out, t)
			continue
		}
		key, last := t.Pkg+"\x00", levels[0]
		if len(levels) == 2 {
			key, last = t.Pkg+"\x00"+levels[0]+"/", levels[1]
		}
		if i, ok := at[key]; ok {
			out[i].Run += "|" + last
			continue
		}
		at[key] = len(out)
		out = append(out, t)
	}
	return out
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// firstLines returns the first n non-empty lines of s, joined by " / ".
func firstLines(s string, n int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
			if len(out) == n {
				break
			}
		}
	}
	return strings.Join(out, " / ")
}
