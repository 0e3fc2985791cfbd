//go:build !linux

package redistest

import "syscall"

// sysProcAttr returns nil: outside Linux there is no parent-death signal, and Cleanup alone stops
// the server.
func sysProcAttr() *syscall.SysProcAttr { return nil }
