//go:build !linux

package e2e

import "syscall"

// sysProcAttr is empty where the kernel cannot kill children with their parent.
func sysProcAttr() *syscall.SysProcAttr { return nil }
