package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
)

// copyTree copies into dst the files of the git work tree at root that git knows or would add:
// the tracked files as they are on disk (uncommitted edits included; deleted ones skipped) and the
// untracked files that .gitignore does not exclude (a new test not yet committed). It returns how
// many it copied. Symbolic links stay links; file modes are kept.
func copyTree(root, dst string) (int, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("git ls-files: %w", err)
	}
	n := 0
	seen := map[string]bool{}
	for _, name := range bytes.Split(bytes.TrimRight(out, "\x00"), []byte{0}) {
		rel := string(name)
		if rel == "" || seen[rel] {
			continue
		}
		seen[rel] = true
		copied, err := copyFile(filepath.Join(root, rel), filepath.Join(dst, rel))
		if err != nil {
			return n, err
		}
		if copied {
			n++
		}
	}
	return n, nil
}

// copyFile copies the file or symbolic link src to dst, creating dst's directories; a src that no
// longer exists is skipped (copied is false).
func copyFile(src, dst string) (copied bool, err error) {
	info, err := os.Lstat(src)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return false, err
	}
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return false, err
		}
		return true, os.Symlink(target, dst)
	case info.IsDir(): // a submodule or nested repository: not ours to copy
		return false, nil
	}
	in, err := os.Open(src)
	if err != nil {
		return false, err
	}
	defer in.Close()
	outf, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, info.Mode().Perm())
	if err != nil {
		return false, err
	}
	if _, err := io.Copy(outf, in); err != nil {
		outf.Close()
		return false, err
	}
	return true, outf.Close()
}
