package crashfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// FS is a mounted crash filesystem. Its methods are safe for concurrent use.
type FS struct {
	// Dir is the mount point: open the files there.
	Dir string

	server *fuse.Server
	conn   string // the fusectl directory of the connection, /sys/fs/fuse/connections/N

	mu       sync.Mutex
	crashed  bool
	unmount  bool
	unsynced map[uint64]*undo // by inode number of the backing file
	stats    Stats
}

// undo holds what one file held at its last sync.
type undo struct {
	file  *os.File         // the backing file, opened for restoring it
	size  int64            // its size at the last sync
	pages map[int64][]byte // page number → content at the last sync, saved on the first change
}

// Mount mounts a crash filesystem over the directory backing at mountpoint, which must be an
// existing directory. What the backing directory holds counts as synced. It fails with an error
// wrapping ErrUnsupported when /dev/fuse is missing or the mount is refused.
func Mount(backing, mountpoint string) (*FS, error) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	root, err := fs.NewLoopbackRoot(backing)
	if err != nil {
		return nil, fmt.Errorf("crashfs: backing directory: %w", err)
	}
	f := &FS{Dir: mountpoint, unsynced: map[uint64]*undo{}}
	lb := root.(*fs.LoopbackNode)
	top := &node{LoopbackNode: lb, fsys: f}
	lb.RootData.RootNode = top
	server, err := fs.Mount(mountpoint, top, &fs.Options{
		MountOptions: fuse.MountOptions{
			DirectMountStrict: true, // mount(2) ourselves: no fusermount
			FsName:            "crashfs:" + backing,
			Name:              "crashfs",
			// Every write must reach us: no passthrough to the backing file, and no writeback
			// cache (its dirty pages would be the kernel's to lose, not ours).
			DisabledCapabilities: fuse.CAP_PASSTHROUGH | fuse.CAP_WRITEBACK_CACHE,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: mount %s: %v", ErrUnsupported, mountpoint, err)
	}
	f.server = server
	var st unix.Stat_t
	if err := unix.Stat(mountpoint, &st); err == nil && unix.Major(st.Dev) == 0 {
		f.conn = fmt.Sprintf("/sys/fs/fuse/connections/%d", unix.Minor(st.Dev))
	}
	return f, nil
}

// Crash is the power cut: it puts every file back to its last sync and detaches the mount
// lazily. Descriptors still open on it can change nothing any more: every write, truncate and
// sync fails with EIO. Serving stops when the last of them is closed, or at once where fusectl is
// mounted (/sys/fs/fuse/connections), since Crash then aborts the connection and a read of a
// mapping faults (SIGBUS). After Crash the backing directory holds what a disk would after the
// crash: mount it again, or open it directly, to recover. Kill the program under test first.
func (f *FS) Crash() error {
	f.mu.Lock()
	if f.crashed || f.unmount {
		f.mu.Unlock()
		return errors.New("crashfs: crash of a file system already crashed or unmounted")
	}
	f.crashed = true
	var errs []error
	for ino, u := range f.unsynced {
		errs = append(errs, u.restore())
		f.stats.Lost++
		delete(f.unsynced, ino)
	}
	f.mu.Unlock()
	errs = append(errs, f.detach())
	return errors.Join(errs...)
}

// Unmount is a clean shutdown: every change stays, synced or not (as a clean unmount writes the
// page cache back), and the mount goes. It fails while files on the mount are open; call Crash
// instead, or close them first.
func (f *FS) Unmount() error {
	f.mu.Lock()
	if f.crashed || f.unmount {
		f.mu.Unlock()
		return nil
	}
	f.unmount = true
	for ino, u := range f.unsynced {
		_ = u.file.Close()
		delete(f.unsynced, ino)
	}
	f.mu.Unlock()
	if err := f.server.Unmount(); err != nil {
		return errors.Join(fmt.Errorf("crashfs: unmount %s: %w", f.Dir, err), f.detach())
	}
	return nil
}

// detach unmounts lazily and aborts the connection, so that the serve loop ends now rather than
// when the last descriptor on the mount is closed.
func (f *FS) detach() error {
	err := syscall.Unmount(f.Dir, syscall.MNT_DETACH)
	if err != nil && !errors.Is(err, syscall.EINVAL) { // EINVAL: not mounted any more
		err = fmt.Errorf("crashfs: detach %s: %w", f.Dir, err)
	} else {
		err = nil
	}
	if f.conn != "" {
		if werr := os.WriteFile(filepath.Join(f.conn, "abort"), []byte("1"), 0); werr == nil {
			f.server.Wait()
		}
	}
	return err
}

// Stats returns the counts so far.
func (f *FS) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.stats
	s.Unsynced = len(f.unsynced)
	return s
}

// restore puts the backing file back to its last sync and closes it.
func (u *undo) restore() error {
	defer u.file.Close()
	if err := u.file.Truncate(u.size); err != nil {
		return fmt.Errorf("crashfs: restore %s: %w", u.file.Name(), err)
	}
	for p, content := range u.pages {
		if _, err := u.file.WriteAt(content, p*PageSize); err != nil {
			return fmt.Errorf("crashfs: restore %s: %w", u.file.Name(), err)
		}
	}
	return nil
}

// save keeps the synced content of the pages that the bytes [from, to) overlap, where not kept yet.
func (u *undo) save(from, to int64) error {
	to = min(to, u.size)
	for p := from / PageSize; p*PageSize < to; p++ {
		if _, ok := u.pages[p]; ok {
			continue
		}
		buf := make([]byte, min(PageSize, u.size-p*PageSize))
		if _, err := u.file.ReadAt(buf, p*PageSize); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		u.pages[p] = buf
	}
	return nil
}

// node is a file or directory of the loopback, with the writes of regular files intercepted.
type node struct {
	*fs.LoopbackNode
	fsys *FS
}

var (
	_ fs.NodeWrapChilder    = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeWriter         = (*node)(nil)
	_ fs.NodeWritever       = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeFsyncer        = (*node)(nil)
	_ fs.NodeAllocater      = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
)

// WrapChild makes every node below the root a node of this file system.
func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	if lb, ok := ops.(*fs.LoopbackNode); ok {
		return &node{LoopbackNode: lb, fsys: n.fsys}
	}
	return ops
}

// changing returns the undo record of n's backing file, creating it on the first change since
// the last sync. The caller holds n.fsys.mu.
func (n *node) changing() (*undo, syscall.Errno) {
	return n.fsys.changing(n.StableAttr().Ino, n.backingPath())
}

// changing returns the undo record of the backing file with inode number ino at path, creating
// it on the first change since the last sync. The caller holds f.mu.
func (f *FS) changing(ino uint64, path string) (*undo, syscall.Errno) {
	if f.crashed {
		return nil, syscall.EIO
	}
	if u := f.unsynced[ino]; u != nil {
		return u, 0
	}
	file, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	info, err := file.Stat()
	if err != nil {
		_ = file.Close()
		return nil, fs.ToErrno(err)
	}
	u := &undo{file: file, size: info.Size(), pages: map[int64][]byte{}}
	f.unsynced[ino] = u
	return u, 0
}

// truncating saves all of the file before an O_TRUNC. The caller holds f.mu.
func (f *FS) truncating(ino uint64, path string) syscall.Errno {
	u, errno := f.changing(ino, path)
	if errno != 0 {
		return errno
	}
	if err := u.save(0, u.size); err != nil {
		return fs.ToErrno(err)
	}
	f.stats.Truncates++
	return 0
}

// backingPath is the path of n in the backing directory.
func (n *node) backingPath() string {
	return filepath.Join(n.RootData.Path, n.Path(n.Root()))
}

// Open opens the backing file. O_TRUNC is a change like any other.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	if n.fsys.crashed {
		return nil, 0, syscall.EIO
	}
	if flags&syscall.O_TRUNC != 0 && n.StableAttr().Mode&syscall.S_IFMT == syscall.S_IFREG {
		if errno := n.fsys.truncating(n.StableAttr().Ino, n.backingPath()); errno != 0 {
			return nil, 0, errno
		}
	}
	fh, fuseFlags, errno := n.LoopbackNode.Open(ctx, flags)
	return wrapHandle(fh), fuseFlags, errno
}

// Create creates the file in the backing directory at once (directory operations are durable);
// an existing file that O_TRUNC empties loses its content only to a sync.
func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	if n.fsys.crashed {
		return nil, nil, 0, syscall.EIO
	}
	path := filepath.Join(n.backingPath(), name)
	var st syscall.Stat_t
	if flags&syscall.O_TRUNC != 0 && syscall.Lstat(path, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG {
		if errno := n.fsys.truncating(st.Ino, path); errno != 0 {
			return nil, nil, 0, errno
		}
	}
	inode, fh, fuseFlags, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	return inode, wrapHandle(fh), fuseFlags, errno
}

// Write writes to the backing file after saving the synced content of the pages it changes.
func (n *node) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	u, errno := n.changing()
	if errno != 0 {
		return 0, errno
	}
	if err := u.save(off, off+int64(len(data))); err != nil {
		return 0, fs.ToErrno(err)
	}
	n.fsys.stats.Writes++
	written, err := u.file.WriteAt(data, off)
	return uint32(written), fs.ToErrno(err)
}

// Writev is Write of the concatenated buffers.
func (n *node) Writev(ctx context.Context, fh fs.FileHandle, data [][]byte, off int64) (uint32, syscall.Errno) {
	var all []byte
	for _, b := range data {
		all = append(all, b...)
	}
	return n.Write(ctx, fh, all, off)
}

// Setattr saves what a truncation drops before passing the change on.
func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	if n.fsys.crashed {
		return syscall.EIO
	}
	if size, ok := in.GetSize(); ok {
		u, errno := n.changing()
		if errno != 0 {
			return errno
		}
		if err := u.save(int64(size), u.size); err != nil {
			return fs.ToErrno(err)
		}
		n.fsys.stats.Truncates++
	}
	return n.LoopbackNode.Setattr(ctx, fh, in, out)
}

// Fsync makes the file durable as it is now. fdatasync (flags&1) counts the same.
func (n *node) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	if n.fsys.crashed {
		return syscall.EIO
	}
	if n.StableAttr().Mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0 // directories: their operations are durable at once
	}
	n.fsys.stats.Syncs++
	ino := n.StableAttr().Ino
	if u := n.fsys.unsynced[ino]; u != nil {
		_ = u.file.Close()
		delete(n.fsys.unsynced, ino)
	}
	return 0
}

// Allocate is refused: the model has no preallocation.
func (n *node) Allocate(ctx context.Context, fh fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	return syscall.EOPNOTSUPP
}

// CopyFileRange is refused, so that the kernel copies through reads and writes.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut, size, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.EOPNOTSUPP
}

// handle is a loopback file handle that never offers its descriptor for FUSE passthrough, which
// would let the kernel write to the backing file behind this file system's back.
type handle struct {
	*fs.LoopbackFile
}

// PassthroughFd refuses passthrough.
func (h *handle) PassthroughFd() (int, bool) { return -1, false }

// wrapHandle wraps a loopback handle; other handles (and nil) are returned as they are.
func wrapHandle(fh fs.FileHandle) fs.FileHandle {
	if lf, ok := fh.(*fs.LoopbackFile); ok {
		return &handle{lf}
	}
	return fh
}
