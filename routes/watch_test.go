package routes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWatch(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "routes.yaml")
	file := func(route string) []byte {
		return []byte("upstreams:\n  t: {url: \"http://127.0.0.1:9000\"}\nroutes:\n  - {name: " + route + ", upstream: t, method: POST, path: /x, class: non_idempotent}\n")
	}
	if err := replaceFile(path, file("first")); err != nil {
		t.Fatal(err)
	}
	type result struct {
		name string
		err  error
	}
	results := make(chan result, 10)
	now := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go NewWatcher(path).Run(ctx, 10*time.Millisecond, now, func(cfg *Config, err error) {
		if err != nil {
			results <- result{err: err}
			return
		}
		results <- result{name: cfg.Routes[0].Name}
	})
	next := func() result {
		t.Helper()
		select {
		case r := <-results:
			return r
		case <-time.After(5 * time.Second):
			t.Fatal("no reload within 5s")
			return result{}
		}
	}
	if err := replaceFile(path, file("second")); err != nil {
		t.Fatal(err)
	}
	if r := next(); r.name != "second" || r.err != nil {
		t.Fatalf("after a change: %+v", r)
	}
	if err := replaceFile(path, []byte("routes: [\n")); err != nil {
		t.Fatal(err)
	}
	if r := next(); r.err == nil || !strings.Contains(r.err.Error(), "routes.yaml") {
		t.Fatalf("after a bad change: %+v", r)
	}
	now <- struct{}{} // SIGHUP: load at once, even unchanged
	if r := next(); r.err == nil {
		t.Fatalf("forced reload of the bad file: %+v", r)
	}
	if err := replaceFile(path, file("third")); err != nil {
		t.Fatal(err)
	}
	if r := next(); r.name != "third" {
		t.Fatalf("after the fix: %+v", r)
	}
	select {
	case r := <-results:
		t.Fatalf("a reload without a change: %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestWatchWithoutPolling: an interval of 0 turns the content checks off (IDEMGATEWAY_ROUTES_POLL=0)
// without stopping the reloads that now asks for (SIGHUP).
func TestWatchWithoutPolling(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "routes.yaml")
	file := func(route string) []byte {
		return []byte("upstreams:\n  t: {url: \"http://127.0.0.1:9000\"}\nroutes:\n  - {name: " + route + ", upstream: t, method: POST, path: /x, class: non_idempotent}\n")
	}
	if err := replaceFile(path, file("first")); err != nil {
		t.Fatal(err)
	}
	names := make(chan string, 10)
	now := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		NewWatcher(path).Run(ctx, 0, now, func(cfg *Config, err error) {
			if err != nil {
				names <- "error: " + err.Error()
				return
			}
			names <- cfg.Routes[0].Name
		})
	}()
	// Two changes, then one request: only the content at the request is loaded.
	for _, name := range []string{"second", "third"} {
		if err := replaceFile(path, file(name)); err != nil {
			t.Fatal(err)
		}
	}
	now <- struct{}{}
	select {
	case name := <-names:
		if name != "third" {
			t.Errorf("reloaded %q, want third (the content when now received)", name)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no reload within 5s of now")
	}
	cancel()
	<-done
}

// replaceFile writes data to path as a deploy tool does, by renaming a file written beside it: a
// watcher that reads path sees the old content or the new, never a half-written file (which a
// poll on a loaded machine would catch between the truncation and the write of os.WriteFile).
func replaceFile(path string, data []byte) error {
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
