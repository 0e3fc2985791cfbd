//go:build !unix

package main

import "os/exec"

// killGroup does nothing here: when cmd's context ends, only the go command is killed.
func killGroup(cmd *exec.Cmd) {}
