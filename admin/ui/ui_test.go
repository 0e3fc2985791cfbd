package ui_test

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/idemgateway/idemgateway/admin/ui"
)

// TestHeaders: every answer of the console forbids scripts, styles and connections of other
// origins and inline script (CSP default-src 'self'), framing, form posts and MIME sniffing.
func TestHeaders(t *testing.T) {
	t.Parallel()
	h := ui.Handler()
	for _, path := range []string{"/", "/console.js", "/console.css", "/missing"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		want := map[string]string{
			"Content-Security-Policy": "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
			"X-Content-Type-Options":  "nosniff",
			"X-Frame-Options":         "DENY",
			"Referrer-Policy":         "no-referrer",
		}
		for k, v := range want {
			if got := w.Header().Get(k); got != v {
				t.Errorf("GET %s: %s = %q, want %q", path, k, got, v)
			}
		}
	}
	for path, ct := range map[string]string{"/": "text/html", "/console.js": "text/javascript", "/console.css": "text/css"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), ct) {
			t.Errorf("GET %s: %d %q, want 200 %s", path, w.Code, w.Header().Get("Content-Type"), ct)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", strings.NewReader("x")))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d, want 405", w.Code)
	}
}

// TestAssetsSelfContained: the page loads nothing from elsewhere and runs no inline script or
// style (the CSP would block them: a test in a browser would see a blank page), and the script
// never turns a string into markup.
func TestAssetsSelfContained(t *testing.T) {
	t.Parallel()
	files := os.DirFS("static")
	var names []string
	_ = fs.WalkDir(files, ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, path)
		}
		return err
	})
	if strings.Join(names, " ") != "console.css console.js favicon.svg index.html" {
		t.Fatalf("static holds %v, want the page, its script, its stylesheet and its icon", names)
	}
	// The one absolute URL allowed is SVG's namespace, a name and not a load.
	url := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	for _, name := range names {
		b, err := fs.ReadFile(files, name)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(b), "http://www.w3.org/2000/svg", "")
		if m := url.FindString(text); m != "" {
			t.Errorf("%s names %s: the console loads nothing from elsewhere", name, m)
		}
		if strings.HasSuffix(name, ".html") {
			for _, bad := range []*regexp.Regexp{regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`), regexp.MustCompile(`(?i)\son[a-z]+=`),
				regexp.MustCompile(`(?i)\sstyle=`), regexp.MustCompile(`(?i)<style`)} {
				if m := bad.FindString(string(b)); m != "" {
					t.Errorf("%s has inline script or style: %q", name, m)
				}
			}
		}
		if strings.HasSuffix(name, ".js") {
			for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
				if strings.Contains(string(b), sink) {
					t.Errorf("%s uses %s: values must be put in the page as text", name, sink)
				}
			}
		}
	}
}
