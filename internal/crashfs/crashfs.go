// Package crashfs is a FUSE filesystem for durability tests: a loopback over a backing directory
// that remembers what each file held when it was last synced, and whose Crash puts every file back
// to that, losing each write that no fsync or fdatasync covered. It plays, for the tests of this
// repository, the part that LazyFS (https://github.com/dsrhaslab/lazyfs) plays in Jepsen: an OS
// crash or a power cut on a disk that honours fsync, where the page cache is lost and the disk
// keeps exactly what was synced.
//
// The model, per regular file:
//   - write, truncate and O_TRUNC change the file at once (every read, stat and mmap sees them) and
//     are volatile until the next fsync or fdatasync of that file, from any descriptor;
//   - fsync and fdatasync make the whole file durable as it is, size included (Linux's fdatasync
//     also writes the size when a read needs it); close, flush and munmap do not;
//   - Crash restores the size and the bytes of every file to its last sync (a file never synced
//     since it was mounted to what it held at the mount).
//
// What the model leaves out: directory operations (create, unlink, rename, mkdir, and the
// metadata of chmod and utimes) are durable at once, so a file created and never synced survives
// Crash, empty or as it was; torn sectors and reordered writes within a file are not produced (a
// crash keeps all of a file's writes up to its last sync and none after it); fallocate and
// copy_file_range are refused with EOPNOTSUPP. The real fsync of the backing file is never called:
// the backing directory stands for the disk, and a test reads it as such.
//
// Mount needs Linux, /dev/fuse and the right to mount (root, or CAP_SYS_ADMIN): it calls mount(2)
// itself, so no fusermount binary is needed. Files are served through the kernel's page cache
// (no direct_io), so shared read-only mmap works, as bbolt needs; FUSE passthrough is turned off
// so that every write reaches this process.
//
// Run the program under test in another process than the one that mounts: a page fault on a
// mapping of a file on the mount waits for this process's FUSE server, and if the Go runtime
// stops the world for the garbage collector meanwhile, the server never answers (a deadlock that
// the first version of the bbolt test hit). Plain reads and writes are system calls and safe.
package crashfs

import "errors"

// PageSize is the unit in which Crash keeps the synced content of a file: the first write to a
// page since the last sync saves the page.
const PageSize = 4096

// ErrUnsupported is wrapped by Mount's error where FUSE cannot be mounted: not Linux, no
// /dev/fuse, or no right to mount.
var ErrUnsupported = errors.New("crashfs: FUSE mount not possible here")

// Stats count what a mounted FS served, since Mount.
type Stats struct {
	// Writes is the number of write requests (one per FUSE WRITE; the kernel may split or
	// merge the writes of a program).
	Writes int
	// Truncates is the number of size changes (truncate, ftruncate, O_TRUNC).
	Truncates int
	// Syncs is the number of fsync and fdatasync requests on regular files.
	Syncs int
	// Unsynced is the number of files changed since their last sync, right now.
	Unsynced int
	// Lost is the number of files that Crash put back to their last sync.
	Lost int
}
