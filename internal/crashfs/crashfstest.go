package crashfs

import (
	"errors"
	"os"
	"testing"
)

// MountTest mounts a crash filesystem over backing at a fresh temporary directory for the test
// tb and unmounts it when the test ends (after the cleanups registered later, such as closing a
// store on it). Where FUSE cannot be mounted it fails the test under CI=true, as CI machines can
// mount it and a durability test must not vanish there, and skips it elsewhere with a message
// that says durability was not checked.
func MountTest(tb testing.TB, backing string) *FS {
	tb.Helper()
	f, err := Mount(backing, tb.TempDir())
	if errors.Is(err, ErrUnsupported) {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("%v\nCI=true: the durability tests must run here (Linux, /dev/fuse, root)", err)
		}
		tb.Skipf("SKIPPED, DURABILITY NOT CHECKED: %v\n(needs Linux, /dev/fuse and root; under CI=true this fails)", err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			tb.Errorf("crashfs: %v", err)
		}
	})
	return f
}
