package yws

import (
	"context"
	"embed"
	"html/template"
	"io/fs"
	"net/http"

	"github.com/nomicore/nomicore/auth"
)

// The editor page's assets, embedded in the binary: nothing is fetched at run time.
// editor/yjs-bundle.js and editor/tiptap-bundle.js are generated from the pinned npm
// packages (make editor-bundle).
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

// GET /favicon.ico: the page's icon (editor/favicon.svg, which the page links to), for what
// asks a site for its icon without reading the page.
func serveFavicon(w http.ResponseWriter, _ *http.Request) {
	b, err := editorFS.ReadFile("editor/favicon.svg")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(b)
}

var (
	pageTemplate     = template.Must(template.ParseFS(editorFS, "editor/index.html"))
	richPageTemplate = template.Must(template.ParseFS(editorFS, "editor/rich.html"))
)

// GET /edit/{id}: a minimal collaborative editor of the namespace's Y.Text("body"). The
// page reads ?token= from its own address and passes it to the WebSocket. The page says
// from the start what the token allows on the namespace (data-access), so that a read-only
// editor's text area is read-only before anything is typed: the y-websocket protocol has no
// message that tells a provider so, only the refusal of its first update.
func (s *Server) servePage(w http.ResponseWriter, r *http.Request) {
	s.serveEditorPage(w, r, pageTemplate)
}

// GET /edit/rich/{id}: a rich-text editor of the namespace's Y.XmlFragment("default"):
// Tiptap with Collaboration and CollaborationCaret over @hocuspocus/provider, through the
// node's Hocuspocus endpoint. Like the plain page, it reads ?token= from its own address
// and says from the start what the token allows.
func (s *Server) serveRichPage(w http.ResponseWriter, r *http.Request) {
	s.serveEditorPage(w, r, richPageTemplate)
}

// serveEditorPage writes one of the editor pages for the namespace of the address.
func (s *Server) serveEditorPage(w http.ResponseWriter, r *http.Request, page *template.Template) {
	ns := r.PathValue("id")
	if !validNamespaceID(ns) {
		writeError(w, http.StatusNotFound, "NAMESPACE_NOT_FOUND", "not a namespace id (ns- and 32 hex digits)")
		return
	}
	access := s.pageAccess(r.Context(), auth.ClientCredential{Token: presentedToken(r), NamespaceID: ns, RemoteAddr: r.RemoteAddr})
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer") // the address may carry ?token=
	h.Set("Content-Security-Policy", "default-src 'self'; connect-src 'self' ws: wss:; style-src 'self' 'unsafe-inline'")
	page.Execute(w, struct{ Namespace, Access string }{ns, access})
}

// pageAccess says what the credential allows on its namespace: "read-write", "read-only",
// or "" when this node does not know the token or it does not grant the namespace (the
// WebSocket's refusal then says why). With --client-auth none every editor may write.
func (s *Server) pageAccess(ctx context.Context, cred auth.ClientCredential) string {
	if s.opts.Clients == nil {
		return "read-write"
	}
	if cred.Token == "" {
		return ""
	}
	g, err := s.opts.Clients.AuthenticateClient(ctx, cred)
	switch {
	case err != nil || !g.Allows(cred.NamespaceID):
		return ""
	case g.ReadOnly:
		return "read-only"
	}
	return "read-write"
}
