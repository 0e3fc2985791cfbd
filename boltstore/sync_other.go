//go:build !linux

package boltstore

import "os"

// fdatasync flushes f to the disk (fsync where there is no fdatasync), as bbolt syncs its file.
func fdatasync(f *os.File) error { return f.Sync() }
