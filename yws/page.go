package yws

import (
	"embed"
	"html/template"
	"io/fs"
	"net/http"
)

// The editor page's assets, embedded in the binary: nothing is fetched at run time.
// editor/yjs-bundle.js is generated from the pinned npm packages (make editor-bundle).
//
//go:embed editor
var editorFS embed.FS

func assetHandler() http.Handler {
	sub, err := fs.Sub(editorFS, "editor")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

var pageTemplate = template.Must(template.ParseFS(editorFS, "editor/index.html"))

// GET /edit/{id}: a minimal collaborative editor of the namespace's Y.Text("body"). The
// page reads ?token= from its own address and passes it to the WebSocket.
func (s *Server) servePage(w http.ResponseWriter, r *http.Request) {
	ns := r.PathValue("id")
	if !validNamespaceID(ns) {
		writeError(w, http.StatusNotFound, "NAMESPACE_NOT_FOUND", "not a namespace id (ns- and 32 hex digits)")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer") // the address may carry ?token=
	h.Set("Content-Security-Policy", "default-src 'self'; connect-src 'self' ws: wss:; style-src 'self' 'unsafe-inline'")
	pageTemplate.Execute(w, struct{ Namespace string }{ns})
}
