// Package childproc holds what the harnesses and tests that start processes (redis-server, the
// gateway, the sandbox) share about them.
package childproc

import "syscall"

// SysProcAttr asks the kernel to kill a child process when its parent dies, so that a harness or
// test binary killed mid-run (a timeout, kill -9) leaves no server behind.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
