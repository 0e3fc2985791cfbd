package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateCommand: idemgateway validate checks the file it is given as an argument, or by
// -routes, prints every problem of a file that is not valid, and fails on it.
func TestValidateCommand(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("upstreams:\n  u: {url: http://127.0.0.1:1}\nroutes:\n  - {name: r, upstream: u, method: POST, path: /r, class: non_idempotent}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("upstreams:\n  u: {url: http://127.0.0.1:1}\nroutes:\n  - {name: r, upstream: nowhere, method: POST, path: /r, class: sometimes}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"validate", good}, {"validate", "-routes", good}, {"validate", good, "-log-level", "debug"}} {
		if err := run(args); err != nil {
			t.Errorf("run(%q) = %v, want nil", args, err)
		}
	}
	for _, args := range [][]string{{"validate", bad}, {"validate", "-routes", bad}, {"validate", filepath.Join(dir, "missing.yaml")}} {
		if err := run(args); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
	var out strings.Builder
	if err := validate(bad, &out); err == nil || !strings.Contains(out.String(), "nowhere") || !strings.Contains(out.String(), "sometimes") {
		t.Errorf("validate(bad) = %v, printed %q; want both problems (the upstream and the class)", err, out.String())
	}
}

// TestHelpExitsZero: -h of the command and of its subcommands prints their usage (the command's
// lists the subcommands, then its flags) and exits 0, not 1 with "flag: help requested".
func TestHelpExitsZero(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-h"}, {"serve", "-h"}, {"validate", "-h"}, {"fingerprint", "-h"}, {"records", "help"}, {"records", "get", "-h"}, {"records", "list", "--help"}} {
		cmd := exec.Command(self, append([]string{"--"}, args...)...)
		cmd.Env = append(os.Environ(), "IDEMGATEWAY_TEST_MAIN=1")
		out, err := cmd.CombinedOutput()
		if err != nil || strings.Contains(string(out), "help requested") || !strings.Contains(strings.ToLower(string(out)), "usage") {
			t.Errorf("idemgateway %q: %v\n%s\nwant its usage and exit 0", args, err, out)
		}
		if args[0] == "-h" && (!strings.Contains(string(out), "idemgateway fingerprint") || !strings.Contains(string(out), "-routes")) {
			t.Errorf("idemgateway -h:\n%s\nwant the subcommands, then the flags", out)
		}
	}
}
