//go:build linux

package crashfs_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/idemgateway/idemgateway/internal/crashfs"
)

// write writes data at off in the file name on the mount, syncing it (fdatasync) when sync is set.
func write(t *testing.T, f *crashfs.FS, name string, data []byte, off int64, sync bool) {
	t.Helper()
	file, err := os.OpenFile(filepath.Join(f.Dir, name), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := file.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := syscall.Fdatasync(int(file.Fd())); err != nil {
			t.Fatal(err)
		}
	}
}

// expectFile checks the content of name in dir.
func expectFile(t *testing.T, dir, name string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		at := 0
		for at < min(len(got), len(want)) && got[at] == want[at] {
			at++
		}
		t.Errorf("%s: %d bytes, want %d; from offset %d: %.20q, want %.20q", name, len(got), len(want), at, got[at:], want[at:])
	}
}

// TestCrashKeepsOnlySyncedWrites: each file is put back to its last fsync or fdatasync; a close is
// not a sync; what was there before the mount counts as synced.
func TestCrashKeepsOnlySyncedWrites(t *testing.T) {
	t.Parallel()
	backing := t.TempDir()
	old := bytes.Repeat([]byte("o"), 3*crashfs.PageSize+100)
	if err := os.WriteFile(filepath.Join(backing, "old"), old, 0o600); err != nil {
		t.Fatal(err)
	}
	f := crashfs.MountTest(t, backing)

	// synced: a write, then fdatasync; a later write without one.
	write(t, f, "synced", []byte("kept"), 0, true)
	write(t, f, "synced", []byte("LOST, and longer"), 2, false)
	// never synced since its creation: it stays, empty.
	write(t, f, "unsynced", []byte("lost"), 0, false)
	// an old file: overwritten across two pages, grown, then shrunk below a page, all unsynced.
	write(t, f, "old", []byte("xxxxxxxx"), crashfs.PageSize-4, false)
	write(t, f, "old", []byte("tail"), int64(len(old))+crashfs.PageSize, false)
	if err := os.Truncate(filepath.Join(f.Dir, "old"), 10); err != nil {
		t.Fatal(err)
	}
	// O_TRUNC, then a synced write to another part: the sync covers the truncation too.
	write(t, f, "truncsync", []byte("0123456789"), 0, true)
	tr, err := os.OpenFile(filepath.Join(f.Dir, "truncsync"), os.O_RDWR|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.WriteAt([]byte("ab"), 0); err != nil {
		t.Fatal(err)
	}
	if err := tr.Sync(); err != nil {
		t.Fatal(err)
	}
	tr.Close()

	// While mounted, every read sees the unsynced state.
	expectFile(t, f.Dir, "synced", []byte("keLOST, and longer"))
	expectFile(t, f.Dir, "old", old[:10])

	st := f.Stats()
	if st.Syncs < 3 || st.Unsynced != 3 {
		t.Errorf("stats before the crash %+v, want at least 3 syncs and 3 files unsynced", st)
	}
	if err := f.Crash(); err != nil {
		t.Fatal(err)
	}
	if st := f.Stats(); st.Lost != 3 || st.Unsynced != 0 {
		t.Errorf("stats after the crash %+v, want 3 files lost, 0 unsynced", st)
	}
	expectFile(t, backing, "synced", []byte("kept"))
	expectFile(t, backing, "unsynced", nil)
	expectFile(t, backing, "old", old)
	expectFile(t, backing, "truncsync", []byte("ab"))

	// A new mount starts from the crashed state and serves it.
	again := crashfs.MountTest(t, backing)
	expectFile(t, again.Dir, "old", old)
}

// TestCrashFailsLaterWrites: after Crash, a descriptor still open on the old mount cannot change
// the backing directory any more.
func TestCrashFailsLaterWrites(t *testing.T) {
	t.Parallel()
	backing := t.TempDir()
	f := crashfs.MountTest(t, backing)
	file, err := os.OpenFile(filepath.Join(f.Dir, "f"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := file.WriteAt([]byte("synced"), 0); err != nil {
		t.Fatal(err)
	}
	if err := file.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Crash(); err != nil {
		t.Fatal(err)
	}
	if _, err := file.WriteAt([]byte("late"), 0); err == nil {
		t.Error("a write after the crash succeeded")
	}
	if err := file.Sync(); err == nil {
		t.Error("a sync after the crash succeeded")
	}
	expectFile(t, backing, "f", []byte("synced"))
}

// mmapEnv names the file that the child process of TestMmapSeesUnsyncedWrites maps.
const mmapEnv = "CRASHFS_TEST_MMAP"

// TestMmapSeesUnsyncedWrites: a shared read-only mapping of a file on the mount (as bbolt reads
// its file) sees writes made with pwrite before any sync, and the crash still drops them. The
// mapping is read in a child process: a page fault in the process that serves the mount can
// deadlock with the garbage collector.
func TestMmapSeesUnsyncedWrites(t *testing.T) {
	if name := os.Getenv(mmapEnv); name != "" {
		mmapChild(t, name)
		return
	}
	t.Parallel()
	backing := t.TempDir()
	f := crashfs.MountTest(t, backing)
	page := bytes.Repeat([]byte("s"), 2*crashfs.PageSize)
	write(t, f, "m", page, 0, true)
	cmd := exec.Command(os.Args[0], "-test.run=^TestMmapSeesUnsyncedWrites$")
	cmd.Env = append(os.Environ(), mmapEnv+"="+filepath.Join(f.Dir, "m"),
		"GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0") // -race waits 1 s at exit by default
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.HasPrefix(out, []byte("mapped s, then u\n")) {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if err := f.Crash(); err != nil {
		t.Fatal(err)
	}
	expectFile(t, backing, "m", page)
}

// mmapChild maps name, reads a byte of its second page, writes another there with pwrite and reads
// it again through the mapping.
func mmapChild(t *testing.T, name string) {
	file, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	m, err := syscall.Mmap(int(file.Fd()), 0, 2*crashfs.PageSize, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap on the mount: %v", err)
	}
	before := m[crashfs.PageSize]
	if _, err := file.WriteAt([]byte("u"), crashfs.PageSize); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("mapped %c, then %c\n", before, m[crashfs.PageSize])
}
