package routes

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"time"
)

// Watcher reloads a routes file when it changes. Make one with NewWatcher right after loading the
// file, then Run it.
type Watcher struct {
	path    string
	applied []byte // SHA-256 of the content last loaded, or last refused
}

// NewWatcher returns a Watcher of the file at path whose current content counts as loaded.
func NewWatcher(path string) *Watcher {
	return &Watcher{path: path, applied: fileSum(path)}
}

func fileSum(path string) []byte {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	s := sha256.Sum256(data)
	return s[:]
}

// Run reloads the file while ctx lasts: each time its content changes (checked every interval; a
// change is taken once the content has stayed the same for one more interval, so a file being
// written is not read half-way), and at once whenever now receives (SIGHUP). An interval of zero
// or less turns the checks off: then only now reloads. It calls apply with
// the loaded Config, or with the load's error (cfg nil) so the caller can log it and keep the
// routes it has; content that failed is not loaded again until it changes or now receives. It
// reads the content, not the modification time, so it also sees Kubernetes ConfigMap updates,
// which swap a symbolic link.
func (w *Watcher) Run(ctx context.Context, interval time.Duration, now <-chan struct{}, apply func(cfg *Config, err error)) {
	load := func(sum []byte) {
		w.applied = sum
		apply(Load(w.path))
	}
	seen := w.applied
	var tick <-chan time.Time // nil: no checks
	if interval > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-now:
			load(fileSum(w.path))
		case <-tick:
			cur := fileSum(w.path)
			if !bytes.Equal(cur, w.applied) && bytes.Equal(cur, seen) {
				load(cur)
			}
			seen = cur
		}
	}
}
