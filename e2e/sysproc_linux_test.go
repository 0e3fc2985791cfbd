package e2e

import "syscall"

// sysProcAttr asks the kernel to kill a child process when the test process dies, so that a test
// binary killed by a timeout leaves no gateway or sandbox behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
