package accesslog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(b []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.buf.Write(b) }

func (l *lines) all(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, s := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if s == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func serve(t *testing.T, level slog.Level) (*httptest.Server, *lines) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/things/{id}", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })
	mux.HandleFunc("POST /v1/things", func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, `{"code":"X"}`)
	})
	mux.HandleFunc("GET /v1/stream", func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		for i := range 2 {
			io.WriteString(w, "data: x\n\n")
			if err := rc.Flush(); err != nil {
				t.Errorf("flush %d: %v", i, err)
			}
			if err := rc.SetWriteDeadline(time.Now().Add(time.Second)); err != nil {
				t.Errorf("write deadline: %v", err)
			}
		}
	})
	mux.HandleFunc("GET /v1/upgrade", func(w http.ResponseWriter, r *http.Request) {
		c, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: close\r\n\r\n")
		rw.Flush()
		c.Close()
	})
	var l lines
	log := slog.New(slog.NewJSONHandler(&l, &slog.HandlerOptions{Level: level}))
	srv := httptest.NewServer(Handler(mux, log, "admin"))
	t.Cleanup(srv.Close)
	return srv, &l
}

// One line per request with method, route, status, duration, bytes and remote address;
// errors at INFO, successes at DEBUG; never the path's values, the query, the body or a
// header.
func TestOneLinePerRequest(t *testing.T) {
	srv, l := serve(t, slog.LevelDebug)
	get := func(path string) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer SECRET-TOKEN")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	get("/v1/things/ns-42?token=SECRET-QUERY")
	resp, err := http.Post(srv.URL+"/v1/things", "application/json", strings.NewReader(`{"secret":"SECRET-BODY"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	get("/nowhere")
	get("/v1/stream")
	got := l.all(t)
	if len(got) != 4 {
		t.Fatalf("%d lines: %v", len(got), got)
	}
	want := []struct {
		level, method, route string
		status, bytes        float64
	}{
		{"DEBUG", "GET", "GET /v1/things/{id}", 200, 5},
		{"INFO", "POST", "POST /v1/things", 409, 12},
		{"INFO", "GET", "-", 404, 19},
		{"DEBUG", "GET", "GET /v1/stream", 200, 18},
	}
	for i, w := range want {
		g := got[i]
		if g["msg"] != "http request" || g["level"] != w.level || g["method"] != w.method || g["route"] != w.route || g["status"] != w.status ||
			g["bytes"] != w.bytes || g["listener"] != "admin" || !strings.HasPrefix(g["remote"].(string), "127.0.0.1:") {
			t.Errorf("line %d: %v, want %+v", i, g, w)
		}
		if _, ok := g["durationMs"].(float64); !ok {
			t.Errorf("line %d has no duration: %v", i, g)
		}
	}
	l.mu.Lock()
	all := l.buf.String()
	l.mu.Unlock()
	for _, secret := range []string{"SECRET", "ns-42"} {
		if strings.Contains(all, secret) {
			t.Errorf("the log carries %q: %s", secret, all)
		}
	}
}

// At INFO, successes leave no line; refusals do.
func TestSuccessesOnlyAtDebug(t *testing.T) {
	srv, l := serve(t, slog.LevelInfo)
	resp, _ := http.Get(srv.URL + "/v1/things/a")
	resp.Body.Close()
	resp, _ = http.Get(srv.URL + "/nowhere")
	resp.Body.Close()
	got := l.all(t)
	if len(got) != 1 || got[0]["status"] != 404.0 {
		t.Fatalf("lines %v", got)
	}
}

// A hijacked connection (a WebSocket upgrade) is logged with status 101.
func TestHijackIsLogged(t *testing.T) {
	srv, l := serve(t, slog.LevelDebug)
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /v1/upgrade HTTP/1.1\r\nHost: x\r\n\r\n")
	status, _ := bufio.NewReader(c).ReadString('\n')
	if !strings.Contains(status, "101") {
		t.Fatalf("status line %q", status)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(l.all(t)) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := l.all(t); len(got) != 1 || got[0]["status"] != 101.0 || got[0]["route"] != "GET /v1/upgrade" {
		t.Fatalf("lines %v", got)
	}
}
