// Package ui is the operator console (docs/operations.md#operator-console): a page, served at
// /ui/ on the admin listener, where people see the queue of unknown outcomes and resolve them,
// and see what the gateway process is doing. It is static: an HTML page, a stylesheet and a
// script, embedded in the binary, loading nothing from elsewhere; everything it shows comes from
// the admin API (package admin), called with the admin token the page asks for.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// securityHeaders are set on every answer of Handler (docs/security.md#operator-console): no
// script, style or connection but the admin listener's own (and no inline script or style), no
// framing (clickjacking), no form posts, no MIME sniffing, no referrer.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options":  "nosniff",
	"X-Frame-Options":         "DENY",
	"Referrer-Policy":         "no-referrer",
	"Cache-Control":           "no-cache",
}

// Handler serves the console's files, the page at "/": mount it under /ui with the prefix
// stripped. It answers GET and HEAD only.
func Handler() http.Handler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree always has it
	}
	server := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range securityHeaders {
			w.Header().Set(k, v)
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		server.ServeHTTP(w, r)
	})
}
