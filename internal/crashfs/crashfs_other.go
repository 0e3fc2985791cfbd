//go:build !linux

package crashfs

import (
	"fmt"
	"runtime"
)

// FS is a mounted crash filesystem; on this system Mount always fails.
type FS struct {
	// Dir is the mount point.
	Dir string
}

// Mount fails with an error wrapping ErrUnsupported: crashfs needs Linux.
func Mount(backing, mountpoint string) (*FS, error) {
	return nil, fmt.Errorf("%w: it needs Linux, this is %s", ErrUnsupported, runtime.GOOS)
}

// Crash is never reached on this system.
func (f *FS) Crash() error { return ErrUnsupported }

// Unmount is never reached on this system.
func (f *FS) Unmount() error { return ErrUnsupported }

// Stats is never reached on this system.
func (f *FS) Stats() Stats { return Stats{} }
