package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestApply(t *testing.T) {
	t.Parallel()
	m := Mutant{Name: "m", File: "f.go", From: "a := 1", To: "a := 2"}
	for _, tc := range []struct {
		name, src, want string
		count           int // -1: applies; else the stale count
	}{
		{"once", "x\na := 1\ny\n", "x\na := 2\ny\n", -1},
		{"missing", "x\ny\n", "", 0},
		{"twice", "a := 1\na := 1\n", "", 2},
		{"overlapping spans count once each", "a := 1a := 1a := 1", "", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := apply(m, tc.src)
			if tc.count < 0 {
				if err != nil || got != tc.want {
					t.Fatalf("apply = %q, %v; want %q, nil", got, err, tc.want)
				}
				return
			}
			var se *staleError
			if !errors.As(err, &se) || se.Count != tc.count || se.File != "f.go" {
				t.Fatalf("apply = %q, %v; want a staleError for f.go with count %d", got, err, tc.count)
			}
		})
	}
	if _, err := apply(Mutant{File: "f.go"}, "anything"); err == nil {
		t.Error("an empty From applied")
	}
	// A multi-line From with tabs, as the table writes them.
	src := "func f() {\n\tif x {\n\t\treturn\n\t}\n}\n"
	got, err := apply(Mutant{From: "\tif x {\n\t\treturn\n\t}\n", To: ""}, src)
	if err != nil || got != "func f() {\n}\n" {
		t.Errorf("multi-line apply = %q, %v", got, err)
	}
}

func TestStaleErrorMessages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  staleError
		want string
	}{
		{staleError{File: "a.go"}, "stale: From does not occur in a.go"},
		{staleError{File: "a.go", Count: 3}, "stale: From occurs 3 times in a.go, want once"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.err, got, tc.want)
		}
	}
}

// TestCheckFile: a row is checked against the file on disk; a missing file is stale too.
func TestCheckFile(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "pkg", "f.go"), []byte("one\ntwo\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var se *staleError
	if err := checkFile(root, Mutant{File: "pkg/f.go", From: "one", To: "1"}); err != nil {
		t.Errorf("applicable row: %v", err)
	}
	if err := checkFile(root, Mutant{File: "pkg/f.go", From: "two", To: "2"}); !errors.As(err, &se) || se.Count != 2 {
		t.Errorf("From twice: %v", err)
	}
	if err := checkFile(root, Mutant{File: "pkg/gone.go", From: "one", To: "1"}); !errors.As(err, &se) {
		t.Errorf("missing file: %v", err)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	ok := Mutant{Name: "a-b", Behaviour: "b", File: "f", From: "x", To: "y", Tests: []Target{{Pkg: "./p", Run: "^TestX$/^sub$"}}}
	if err := validate([]Mutant{ok}); err != nil {
		t.Fatalf("a valid row: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(m *Mutant)
		ms   func(m Mutant) []Mutant
	}{
		{"not kebab", func(m *Mutant) { m.Name = "A_b" }, nil},
		{"no behaviour", func(m *Mutant) { m.Behaviour = "" }, nil},
		{"no change", func(m *Mutant) { m.To = m.From }, nil},
		{"no tests", func(m *Mutant) { m.Tests = nil }, nil},
		{"package not relative", func(m *Mutant) { m.Tests = []Target{{Pkg: "gateway", Run: "^T$"}} }, nil},
		{"bad regexp", func(m *Mutant) { m.Tests = []Target{{Pkg: "./p", Run: "^T($"}} }, nil},
		{"name twice", func(m *Mutant) {}, func(m Mutant) []Mutant { return []Mutant{m, m} }},
		{"core row with an e2e target", func(m *Mutant) { m.Core, m.Tests = true, []Target{{Pkg: "./e2e", Run: "^TestE$"}} }, nil},
	} {
		m := ok
		tc.edit(&m)
		ms := []Mutant{m}
		if tc.ms != nil {
			ms = tc.ms(m)
		}
		if err := validate(ms); err == nil {
			t.Errorf("%s: validate accepted %+v", tc.name, ms)
		}
	}
}

// TestMutantsApplyToTheTree keeps the table honest between runs of make mutate: every row is
// valid, and its From occurs exactly once in its File. A change of the code that makes a row stale
// fails here, at make test, rather than at the next mutation run.
func TestMutantsApplyToTheTree(t *testing.T) {
	t.Parallel()
	if err := validate(mutants); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join("..", "..")
	for _, m := range mutants {
		if err := checkFile(root, m); err != nil {
			t.Errorf("mutant %s: %v (rewrite its From, or the row)", m.Name, err)
		}
	}
}

func TestSelectMutants(t *testing.T) {
	t.Parallel()
	ms := []Mutant{{Name: "claim-a"}, {Name: "claim-b", Core: true}, {Name: "renew"}}
	got, err := selectMutants(ms, "^claim-", false)
	if err != nil || len(got) != 2 || got[0].Name != "claim-a" || got[1].Name != "claim-b" {
		t.Errorf("selectMutants(^claim-) = %v, %v", got, err)
	}
	if got, err := selectMutants(ms, "", false); err != nil || len(got) != 3 {
		t.Errorf("selectMutants(\"\") = %v, %v", got, err)
	}
	if got, err := selectMutants(ms, "", true); err != nil || len(got) != 1 || got[0].Name != "claim-b" {
		t.Errorf("selectMutants(\"\", core) = %v, %v; want claim-b alone", got, err)
	}
	if _, err := selectMutants(ms, "nothing", false); err == nil {
		t.Error("a pattern that matches no mutant was accepted")
	}
	if _, err := selectMutants(ms, "(", false); err == nil {
		t.Error("a bad pattern was accepted")
	}
}

func TestPackageOf(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, f := range []string{"redisstore/store.go", "redisstore/scripts/claim.lua", "gateway/proxy.go"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for file, want := range map[string]string{
		"gateway/proxy.go":              "./gateway",
		"redisstore/scripts/claim.lua":  "./redisstore", // embedded by the package above it
		"redisstore/scripts/commit.lua": "./redisstore",
	} {
		if got := packageOf(root, file); got != want {
			t.Errorf("packageOf(%s) = %q, want %q", file, got, want)
		}
	}
}

func TestTargetsForTheUnmutatedRun(t *testing.T) {
	t.Parallel()
	a, b := Target{Pkg: "./gateway", Run: "^TestA$"}, Target{Pkg: "./gateway", Run: "^TestB$"}
	s1, s2 := Target{Pkg: "./boltstore", Run: "^TestConformance$/^X$"}, Target{Pkg: "./boltstore", Run: "^TestConformance$/^Y$"}
	deep := Target{Pkg: "./boltstore", Run: "^TestC$/^x$/^y$"}
	e := Target{Pkg: "./e2e", Run: "^TestE$"}
	ms := []Mutant{{Tests: []Target{a, s1}}, {Tests: []Target{b, a, deep}}, {Tests: []Target{s2, e, s1}}}
	unique := uniqueTargets(ms)
	if want := []Target{a, s1, b, deep, s2, e}; !equal(unique, want) {
		t.Fatalf("uniqueTargets = %v, want %v", unique, want)
	}
	want := []Target{
		{Pkg: "./gateway", Run: "^TestA$|^TestB$"},
		{Pkg: "./boltstore", Run: "^TestConformance$/^X$|^Y$"},
		deep,
		e,
	}
	if got := groupTargets(unique); !equal(got, want) {
		t.Errorf("groupTargets = %v, want %v", got, want)
	}
}

func equal(a, b []Target) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestWriteResults(t *testing.T) {
	t.Parallel()
	m := func(name string) Mutant {
		return Mutant{Name: name, Behaviour: "a | b\nacross lines", Tests: []Target{{Pkg: "./gateway", Run: "^TestA$|^TestB$"}, {Pkg: "./e2e", Run: "^TestC$"}}}
	}
	rs := []result{
		{Mutant: m("one"), Result: caught, By: "by ./e2e ^TestC$", Elapsed: 1500 * time.Millisecond},
		{Mutant: m("two"), Result: survived, Elapsed: 61 * time.Second},
		{Mutant: m("three"), Result: stale, By: "stale: From occurs 2 times in f.go, want once"},
	}
	var b strings.Builder
	writeResults(&b, rs)
	want := "| mutant | behaviour | tests | result | seconds |\n" +
		"|---|---|---|---|---:|\n" +
		"| `one` | a \\| b across lines | `./gateway ^TestA$\\|^TestB$; ./e2e ^TestC$` | caught: by ./e2e ^TestC$ | 2 |\n" +
		"| `two` | a \\| b across lines | `./gateway ^TestA$\\|^TestB$; ./e2e ^TestC$` | **survived** | 61 |\n" +
		"| `three` | a \\| b across lines | `./gateway ^TestA$\\|^TestB$; ./e2e ^TestC$` | **stale: stale: From occurs 2 times in f.go, want once** | 0 |\n"
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
	if got, want := summary(rs, 90*time.Second), "3 mutants: 1 caught, 1 survived, 1 stale, 0 invalid; 1m30s"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}

func TestWriteList(t *testing.T) {
	t.Parallel()
	ms := []Mutant{
		{Name: "ok", Behaviour: "b", File: "f.go", Tests: []Target{{Pkg: "./p", Run: "^T$"}}},
		{Name: "old", Behaviour: "b", File: "f.go", Tests: []Target{{Pkg: "./p", Run: "^T$"}}},
	}
	var b strings.Builder
	writeList(&b, ms, func(m Mutant) error {
		if m.Name == "old" {
			return &staleError{File: m.File}
		}
		return nil
	})
	want := "| mutant | behaviour | file | tests | status |\n" +
		"|---|---|---|---|---|\n" +
		"| `ok` | b | `f.go` | `./p ^T$` | ok |\n" +
		"| `old` | b | `f.go` | `./p ^T$` | **stale: From does not occur in f.go** |\n"
	if got := b.String(); got != want {
		t.Errorf("list:\n%s\nwant:\n%s", got, want)
	}
}

func TestBrokenOutput(t *testing.T) {
	t.Parallel()
	for out, want := range map[string]string{
		"ok  \tgithub.com/x/gateway\t1.2s\n":                          "",
		"--- FAIL: TestX (0.01s)\nFAIL\tgithub.com/x/gateway\t0.1s\n": "",
		"FAIL\tgithub.com/x/gateway [build failed]\n":                 "[build failed]",
		"ERR Error compiling script (new function): user_script:3\n":  "Error compiling script",
	} {
		if got := brokenOutput(out); got != want {
			t.Errorf("brokenOutput(%q) = %q, want %q", out, got, want)
		}
	}
}

// TestCopyTree copies the files git lists: tracked (with their edits), untracked but not ignored;
// not ignored ones, not deleted ones.
func TestCopyTree(t *testing.T) {
	t.Parallel()
	dst := t.TempDir()
	n, err := copyTree(filepath.Join("..", ".."), dst)
	if err != nil {
		t.Fatal(err)
	}
	if n < 50 {
		t.Fatalf("copied %d files", n)
	}
	for _, f := range []string{"go.mod", "internal/mutate/mutants.go", "redisstore/scripts/claim.lua"} {
		want, err := os.ReadFile(filepath.Join("..", "..", f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dst, f))
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: copy differs (%v)", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dst, ".git")); err == nil {
		t.Error(".git was copied")
	}
}
