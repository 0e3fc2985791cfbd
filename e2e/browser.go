package e2e

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// Browser is a headless Chromium (Debian's chromium package) driven by chromedp, for the tests
// of the operator console.
type Browser struct {
	Ctx context.Context // the tab: pass it to chromedp.Run

	mu       sync.Mutex
	requests []string // the URLs the tab has requested
}

// StartBrowser starts Chromium with an empty profile in t's temporary directory, without the
// background connections it makes to Google's hosts, and opens a tab of 1280×900; everything
// stops when t ends. Without Chromium it fails the test under CI (the environment variable CI
// set) and skips it elsewhere.
func StartBrowser(t *testing.T) *Browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		msg := "Chromium is not installed (Debian package chromium)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.WindowSize(1280, 900),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	// The first call starts the browser, which lives as long as the context of that call: the
	// tab's, not the bounded one below.
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	b := &Browser{}
	if err := chromedp.Listen(tab, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			b.mu.Lock()
			b.requests = append(b.requests, e.Request.URL)
			b.mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("listening to Chromium's network events: %v", err)
	}
	// Bounds every step of a test: a page that never shows what is waited for fails, not hangs.
	ctx, cancelTimeout := context.WithTimeout(tab, 3*time.Minute)
	t.Cleanup(cancelTimeout)
	b.Ctx = ctx
	return b
}

// Requests returns the URLs the tab has requested so far.
func (b *Browser) Requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.requests...)
}

// Do runs chromedp actions in the tab, in order, failing t with what on an error.
func (b *Browser) Do(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(b.Ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Eval returns the value of a JavaScript expression in the tab.
func Eval[T any](t *testing.T, b *Browser, expression string) T {
	t.Helper()
	v, err := chromedp.Run(b.Ctx, chromedp.Evaluate[T](expression))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expression, err)
	}
	return v
}

// Until waits until a JavaScript expression is truthy in the tab (polled at each animation
// frame, up to a minute), failing t with what when it never is.
func (b *Browser) Until(t *testing.T, what, expression string) {
	t.Helper()
	if _, err := chromedp.Run(b.Ctx, chromedp.Poll[chromedp.Void](expression, chromedp.WithPollingTimeout(time.Minute))); err != nil {
		shown, _ := chromedp.Run(b.Ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
		t.Fatalf("waiting for %s (%s): %v; the page shows:\n%s", what, expression, err, shown)
	}
}
