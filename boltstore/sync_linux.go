package boltstore

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data, and its size when it changed, to the disk, as bbolt syncs its file.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
