//go:build !linux

// Package childproc holds what the harnesses and tests that start processes (redis-server, the
// gateway, the sandbox) share about them.
package childproc

import "syscall"

// SysProcAttr returns nil: outside Linux there is no parent-death signal, and the parent's own
// cleanup alone stops its children.
func SysProcAttr() *syscall.SysProcAttr { return nil }
