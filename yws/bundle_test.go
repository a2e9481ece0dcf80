package yws

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The committed editor bundles (the plain page's and the rich-text page's) are exactly what
// `make editor-bundle` builds from the pinned npm packages (e2e/yws/package-lock.json): a
// changed pin or build without a rebuilt bundle fails here.
func TestEditorBundleIsUpToDate(t *testing.T) {
	script, _ := filepath.Abs(filepath.Join("..", "e2e", "yws", "bundle", "build.sh"))
	esbuild := filepath.Join(filepath.Dir(filepath.Dir(script)), "node_modules", ".bin", "esbuild")
	if _, err := os.Stat(esbuild); err != nil {
		msg := "the bundle's npm packages are not installed (make js-deps): " + err.Error()
		if os.Getenv("NOMICORE_REQUIRE_ORACLE") == "1" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPED LOUDLY: " + msg)
	}
	out := t.TempDir()
	if b, err := exec.Command("bash", script, out).CombinedOutput(); err != nil {
		t.Fatalf("building the bundles: %v\n%s", err, b)
	}
	for _, name := range []string{"yjs-bundle.js", "tiptap-bundle.js"} {
		built, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		committed, err := editorFS.ReadFile("editor/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(built, committed) {
			t.Errorf("yws/editor/%s (%d bytes) differs from a fresh build (%d bytes): run make editor-bundle and commit it", name, len(committed), len(built))
		}
	}
}

// The page and its assets are served from the binary.
func TestEditorPageAndAssets(t *testing.T) {
	e := newEnv(t, nil)
	for path, want := range map[string]string{
		"/edit/" + e.ns:                 `data-namespace="` + e.ns + `"`,
		"/edit/assets/editor.js":        "new WebsocketProvider(",
		"/edit/assets/yjs-bundle.js":    "var NomicoreYjs=",
		"/edit/rich/" + e.ns:            `data-namespace="` + e.ns + `"`,
		"/edit/assets/rich.js":          "new HocuspocusProvider(",
		"/edit/assets/tiptap-bundle.js": "var NomicoreTiptap=",
		"/edit/assets/editor.css":       "textarea",
		"/edit/assets/favicon.svg":      "<svg", // the page's icon, which it links to
		"/favicon.ico":                  "<svg", // the same, where browsers look without a link
	} {
		resp, err := e.http.Client().Get(e.http.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(b.Bytes(), []byte(want)) {
			t.Errorf("%s: %d, %d bytes, want %q in it", path, resp.StatusCode, b.Len(), want)
		}
	}
	for _, path := range []string{"/edit/not-a-namespace", "/edit/rich/not-a-namespace"} {
		resp, err := e.http.Client().Get(e.http.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
	}
}

// The page says what its token allows on the namespace, so that a read-only editor is
// read-only from the start; a token it does not know, or one for other namespaces, says
// nothing (the WebSocket refuses it with the reason). --client-auth none writes.
func TestEditorPageSaysWhatTheTokenAllows(t *testing.T) {
	e := newEnv(t, nil)
	open := newEnv(t, func(o *Options) { o.Clients = nil })
	for _, tc := range []struct {
		env          *env
		query, want  string
		bearerHeader bool
	}{
		{e, "?token=reader", `data-access="read-only"`, false},
		{e, "", `data-access="read-only"`, true}, // Authorization: Bearer reader
		{e, "?token=writer", `data-access="read-write"`, false},
		{e, "?token=other", `data-access=""`, false},
		{e, "?token=nobody", `data-access=""`, false},
		{e, "", `data-access=""`, false},
		{open, "", `data-access="read-write"`, false},
	} {
		req, _ := http.NewRequest("GET", tc.env.http.URL+"/edit/"+tc.env.ns+tc.query, nil)
		if tc.bearerHeader {
			req.Header.Set("Authorization", "Bearer reader")
		}
		resp, err := tc.env.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(b.Bytes(), []byte(tc.want)) {
			t.Errorf("%q (bearer %v): %d, want %s in:\n%s", tc.query, tc.bearerHeader, resp.StatusCode, tc.want, b.Bytes())
		}
	} // The rich-text page says the same.
	resp, err := e.http.Client().Get(e.http.URL + "/edit/rich/" + e.ns + "?token=reader")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(b.Bytes(), []byte(`data-access="read-only"`)) {
		t.Errorf("the rich-text page of a read-only token:\n%s", b.Bytes())
	}
}
