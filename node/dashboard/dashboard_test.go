package dashboard

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, path string, header ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestServesThePageAndItsAssets(t *testing.T) {
	h := Handler(Options{})
	for _, c := range []struct{ path, ctype, contains string }{
		{"/", "text/html; charset=utf-8", `<script src="/ui/app.js" defer></script>`},
		{"/ui/app.js", "text/javascript; charset=utf-8", "ROUTES"},
		{"/ui/app.css", "text/css; charset=utf-8", ".state.good"},
		{"/ui/session.json", "application/json", `{"tokenRequired":false}`},
		{"/ui/favicon.svg", "image/svg+xml", "<svg"}, // the page's icon, which it links to
		{"/favicon.ico", "image/svg+xml", "<svg"},    // the same, where browsers look without a link
	} {
		r := get(t, h, c.path)
		b := body(t, r)
		if r.StatusCode != 200 || r.Header.Get("Content-Type") != c.ctype || !strings.Contains(b, c.contains) {
			t.Errorf("GET %s = %d %s, body without %q", c.path, r.StatusCode, r.Header.Get("Content-Type"), c.contains)
		}
		csp := r.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: the policy %q lacks %q", c.path, csp, want)
			}
		}
		if r.Header.Get("X-Content-Type-Options") != "nosniff" || r.Header.Get("Cache-Control") != "no-cache" {
			t.Errorf("GET %s: headers %v", c.path, r.Header)
		}
		// A second load revalidates: 304 with the same ETag.
		etag := r.Header.Get("ETag")
		if r2 := get(t, h, c.path, "If-None-Match", etag); etag == "" || r2.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with If-None-Match %s = %d", c.path, etag, r2.StatusCode)
		}
	}
	if b := body(t, get(t, Handler(Options{TokenRequired: true}), "/ui/session.json")); b != "{\"tokenRequired\":true}\n" {
		t.Errorf("session with a token: %s", b)
	}
	for _, p := range []string{"/ui/nope.js", "/ui/index.html", "/ui/", "/ui/../dashboard.go"} {
		if r := get(t, h, p); r.StatusCode != 404 {
			t.Errorf("GET %s = %d", p, r.StatusCode)
		}
	}
}

// Nothing is fetched from elsewhere: every src and href of the page is on this origin (or
// the empty data: icon), and the script builds no URL of another site.
func TestNothingFromElsewhere(t *testing.T) {
	for _, name := range []string{"assets/index.html", "assets/app.js", "assets/app.css"} {
		b, err := assets.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?:src|href)=["']([^"']*)["']`).FindAllStringSubmatch(string(b), -1) {
			if u := m[1]; !strings.HasPrefix(u, "/") && !strings.HasPrefix(u, "#") && u != "data:," {
				t.Errorf("%s: %s", name, m[0])
			}
		}
		for _, m := range regexp.MustCompile(`https?://[^\s'")]+`).FindAllString(string(b), -1) {
			if m != "http://www.w3.org/2000/svg" { // the SVG namespace name, not a fetch
				t.Errorf("%s names %s", name, m)
			}
		}
		if strings.Contains(string(b), "innerHTML") {
			t.Errorf("%s uses innerHTML (the page sets text only)", name)
		}
	}
}

// Every admin route the page calls is in README.md's route table.
func TestEveryRouteThePageUsesIsDocumented(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	span := regexp.MustCompile("`((?:GET|POST|PUT|DELETE) /[^`]*)`")
	for _, line := range strings.Split(string(readme), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		for _, m := range span.FindAllStringSubmatch(line, -1) {
			documented[m[1]] = true
		}
	}
	js, err := assets.ReadFile("assets/app.js")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)const ROUTES = \{(.*?)\};`).FindSubmatch(js)
	if block == nil {
		t.Fatal("app.js has no ROUTES table")
	}
	routes := regexp.MustCompile(`'((?:GET|POST|PUT|DELETE) [^']+)'`).FindAllSubmatch(block[1], -1)
	if len(routes) < 10 {
		t.Fatalf("only %d routes found in ROUTES", len(routes))
	}
	for _, m := range routes {
		r := string(m[1])
		if !documented[r] && !(strings.HasPrefix(r, "GET /ui/") && documented["GET /ui/…"] && strings.Contains(string(readme), "`"+r+"`")) {
			t.Errorf("the page uses %s, which README.md's route table does not list", r)
		}
	}
	// And the page calls routes only through ROUTES: no path literal elsewhere.
	rest := strings.Replace(string(js), string(block[0]), "", 1)
	if m := regexp.MustCompile(`'/(?:v1|ui)/[^']*'`).FindString(rest); m != "" {
		t.Errorf("app.js calls %s outside ROUTES", m)
	}
}
