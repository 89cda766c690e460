// Package ui is the host's web dashboard: a page and its script, embedded
// in the binary (nothing is fetched from elsewhere), served at /ui. The
// page holds no data; it reads the API (/v1/ui/...) with the token the
// user gives it, so the dashboard is behind the same tokens as the API.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// Handler serves /ui (the page) and /ui/assets/... (its script and style).
func Handler() http.Handler {
	sub, _ := fs.Sub(static, "static")
	files := http.FileServer(http.FS(sub))
	page, _ := fs.ReadFile(sub, "index.html")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// Only this origin's own script and style; no frames, no plugins.
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if rest, ok := strings.CutPrefix(r.URL.Path, "/ui/assets/"); ok {
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/assets/" + rest
			files.ServeHTTP(w, r2)
			return
		}
		h.Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(page)
	})
}
