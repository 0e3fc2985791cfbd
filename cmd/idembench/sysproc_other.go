//go:build !linux

package main

import (
	"time"
)

// processCPU returns 0: the CPU time of the process is read on Linux only.
func processCPU() time.Duration { return 0 }

// machineBusy reports nothing: the machine's CPU time is read on Linux only.
func machineBusy() (busy time.Duration, ok bool) { return 0, false }

// fsType returns "": the filesystem is named on Linux only.
func fsType(dir string) string { return "" }

// processTreeCPU reports nothing: processes are read on Linux only.
func processTreeCPU(pid int) time.Duration { return 0 }
