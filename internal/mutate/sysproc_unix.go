//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// killGroup makes cmd run in a process group of its own, killed whole when cmd's context ends:
// go test's test binary, and the redis-servers and gateways the tests start, go with it.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
