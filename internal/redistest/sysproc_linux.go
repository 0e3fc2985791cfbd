package redistest

import "syscall"

// sysProcAttr asks the kernel to kill redis-server when the test process dies, so that a test
// binary killed by a timeout leaves no server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
