// Package dashboard is the web page both binaries serve at / of their admin listener: what
// the process is doing at a glance — on a hub its peers' connections and its namespaces,
// on a peer its connection to the hub and its targets — with a page per namespace (its
// peers, its document as JSON, its events) and the admin actions behind confirmation
// dialogs (an epoch bump, a schema replacement, a delete — which also asks for the
// namespace's name or id typed in full; a peer's reset and target removal).
//
// The page is three files written by hand (assets/: index.html, app.css, app.js), embedded
// in the binary: nothing is fetched from elsewhere and building needs no JavaScript tools.
// It uses only the documented admin routes, with the admin token when the API requires one
// (the page asks for it and keeps it in the tab's sessionStorage, never in a URL), and stays
// live through GET /v1/status/stream, read with fetch so the token travels in a header.
//
// Handler serves the files with a Content-Security-Policy that allows nothing but this
// origin: no inline script, no other site, no framing.
package dashboard

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed assets
var assets embed.FS

// Options configure the Handler.
type Options struct {
	// TokenRequired: the admin API requires a bearer token, so the page asks for it first
	// (GET /ui/session.json tells the page; it says nothing else).
	TokenRequired bool
}

// file is an embedded asset ready to serve.
type file struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the page at GET / and its assets at GET /ui/NAME; its icon also at GET
// /favicon.ico.
func Handler(opts Options) http.Handler {
	files := map[string]file{}
	types := map[string]string{".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
		".js": "text/javascript; charset=utf-8", ".json": "application/json", ".svg": "image/svg+xml"}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		files[strings.TrimPrefix(p, "assets/")] = newFile(b, types[path.Ext(p)])
		return nil
	})
	if err != nil {
		panic("dashboard: reading the embedded assets: " + err.Error()) // the build embeds them
	}
	session, _ := json.Marshal(map[string]bool{"tokenRequired": opts.TokenRequired})
	files["session.json"] = newFile(append(session, '\n'), types[".json"])
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := "index.html"
		switch {
		case r.URL.Path == "/favicon.ico": // for what asks the site for its icon without reading the page
			name = "favicon.svg"
		case r.URL.Path != "/":
			name = strings.TrimPrefix(r.URL.Path, "/ui/")
		}
		f, ok := files[name]
		if !ok || name == "index.html" && r.URL.Path != "/" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"code":"NOT_FOUND","message":"no such dashboard file"}` + "\n"))
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.contentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", f.etag)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
			"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		if match := r.Header.Get("If-None-Match"); match == f.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Write(f.body)
	})
}

func newFile(b []byte, contentType string) file {
	sum := sha256.Sum256(b)
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	return file{body: b, contentType: contentType, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
}
