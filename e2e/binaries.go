// Package e2e runs the built idemgateway binary in front of the built sandbox upstream, on the
// embedded store and on a real redis-server, and checks the decision table of docs/contract.md §4
// and the field cases (docs/cases.md) from the outside: status, Idempotency-Decision, problem
// members, and the number of side effects the sandbox counted; and MCP tool calls through kind:
// mcp routes (§7) with the official go-sdk and TypeScript clients (mcp_test.go, mcp_ts_test.go).
//
// Its non-test files are the harness that its tests and the chaos suite (e2e/chaos) share: Main
// builds the binaries for a package's TestMain; StartGateway and StartSandbox run them as child
// processes of a test (process.go); Gateway.Send and Gateway.Record talk to a gateway as a client
// and an operator would (client.go, gateway.go); ScriptSHAs names the store's Redis scripts for a
// fault proxy (scripts.go).
package e2e

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// bin holds the paths of the binaries Main builds.
var bin struct {
	gateway, sandbox string
}

// Main builds the binaries into a temporary directory, runs m, removes them and exits with m's
// code: the TestMain of a package of end-to-end tests.
func Main(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "idemgateway-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	code := 1
	if err := buildBinaries(dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildBinaries builds ./cmd/idemgateway and ./cmd/sandbox into dir, at the same time. The gateway
// is built with -race when the tests are, so that a data race in the real binary fails the test
// that provoked it (see process.stop).
func buildBinaries(dir string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go command is not on PATH: %w", err)
	}
	bin.gateway = filepath.Join(dir, "idemgateway")
	bin.sandbox = filepath.Join(dir, "sandbox")
	gatewayArgs := []string{"build", "-o", bin.gateway}
	if raceEnabled {
		gatewayArgs = append(gatewayArgs, "-race")
	}
	builds := [][]string{
		append(gatewayArgs, "./cmd/idemgateway"),
		{"build", "-o", bin.sandbox, "./cmd/sandbox"},
	}
	errs := make([]error, len(builds))
	var wg sync.WaitGroup
	for i, args := range builds {
		wg.Go(func() {
			cmd := exec.Command(goTool, args...)
			cmd.Dir = moduleRoot()
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("go %v: %v\n%s", args, err, out)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// moduleRoot is the directory the binaries are built from: E2E_MODULE_ROOT when set (to test
// another checkout), else the module that holds the test's package: the nearest directory above
// it with a go.mod.
func moduleRoot() string {
	if dir := os.Getenv("E2E_MODULE_ROOT"); dir != "" {
		return dir
	}
	dir, err := os.Getwd() // go test runs a package's tests in its directory
	if err != nil {
		return ".."
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return ".."
		}
	}
}
