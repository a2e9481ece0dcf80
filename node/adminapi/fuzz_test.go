package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomicore/nomicore/changefeed"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/versions"
	"github.com/nomicore/nomicore/yjs"
)

// fuzzStatuses is the status each error code may come with: the classification the admin
// API promises (README.md#admin-api — 400 malformed input, 404 unknown, 409 a conflict with
// the namespace's state, 503 not available now — and the HTTP meaning of the rest).
// INTERNAL_ERROR (500) is not in it: an input the API did not classify is a failure.
var fuzzStatuses = map[string][]int{
	CodeBadRequest:           {http.StatusBadRequest},
	CodeApplyFailed:          {http.StatusBadRequest},
	CodeRootType:             {http.StatusBadRequest},
	CodeUnauthorized:         {http.StatusUnauthorized},
	CodeRoleViolation:        {http.StatusForbidden},
	CodeNotFound:             {http.StatusNotFound},
	CodeNamespaceNotFound:    {http.StatusNotFound},
	CodeMethodNotAllowed:     {http.StatusMethodNotAllowed},
	CodeProtected:            {http.StatusConflict},
	CodeConflicted:           {http.StatusConflict},
	CodeReplicaFailed:        {http.StatusConflict},
	CodeNotReplicated:        {http.StatusConflict},
	CodeTargetConflict:       {http.StatusConflict},
	CodeNamespaceInUse:       {http.StatusConflict},
	CodeEpochMismatch:        {http.StatusConflict},
	CodeNamespaceDeleted:     {http.StatusNotFound},
	CodeNameTaken:            {http.StatusConflict},
	CodeSchemaMismatch:       {http.StatusConflict},
	CodeConflict:             {http.StatusConflict},
	CodeClientExists:         {http.StatusConflict},
	CodeDocumentTooLarge:     {http.StatusRequestEntityTooLarge},
	CodeCrossOrigin:          {http.StatusForbidden},
	CodeHostNotAllowed:       {http.StatusForbidden},
	CodeUpdateTooLarge:       {http.StatusRequestEntityTooLarge},
	CodeRequestTooLarge:      {http.StatusRequestEntityTooLarge},
	CodeUnsupportedMediaType: {http.StatusUnsupportedMediaType},
	CodeNotBootstrapped:      {http.StatusServiceUnavailable},
	CodeDegraded:             {http.StatusServiceUnavailable},
	CodeOverloaded:           {http.StatusServiceUnavailable},
	CodeUnavailable:          {http.StatusServiceUnavailable},
	CodeTooManyStreams:       {http.StatusServiceUnavailable},
	CodeTimeout:              {http.StatusGatewayTimeout},
	CodeTokenRequired:        {http.StatusForbidden},
	CodeNamespaceExists:      {http.StatusConflict},
	CodeCursorExpired:        {http.StatusGone},
	CodeVersionNotFound:      {http.StatusNotFound},
	CodeRestoreTooLarge:      {http.StatusRequestEntityTooLarge},
}

var (
	fuzzMethods      = []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"}
	fuzzContentTypes = []string{"", "application/json", "application/octet-stream", "text/plain",
		"application/json; charset=utf-8", "application/json;;", "multipart/form-data; boundary="}
	fuzzMaxUpdate = 4096
)

// fuzzSnapshot is a hub namespace's snapshot, for the peer's replica (made once).
var fuzzSnapshot = sync.OnceValues(func() ([]byte, error) {
	st, err := persistence.NewMemoryStore(persistence.Options{Compactor: registry.Compactor()})
	if err != nil {
		return nil, err
	}
	reg, err := registry.New(registry.Config{Role: registry.RoleHub, Catalog: st, Documents: st})
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	defer func() { reg.Close(ctx); st.Close(ctx) }()
	c, err := reg.Create(ctx, "default")
	if err != nil {
		return nil, err
	}
	l, err := reg.Open(ctx, "default", c.NamespaceID)
	if err != nil {
		return nil, err
	}
	defer l.Release()
	state, err := l.EncodeState(ctx, nil)
	return append([]byte(c.NamespaceID+"|"+c.Identity.ReplicationID+"|"), state...), err
})

// controllerTargets is the admin API's Targets over the real namespace.TargetController
// (without the store that remembers them: the binaries' node.PersistentTargets).
type controllerTargets struct {
	tc *namespace.TargetController
	mu sync.Mutex
}

func (c *controllerTargets) Targets() []namespace.TargetStatus { return c.tc.Targets() }
func (c *controllerTargets) Target(id string) (namespace.TargetStatus, bool) {
	return c.tc.Target(id)
}
func (c *controllerTargets) AddTarget(_ context.Context, t namespace.Target) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.tc.Target(t.NamespaceID); ok {
		if cur.Owner != t.Owner {
			return false, namespace.ErrTargetConflict
		}
		return false, nil
	}
	return true, c.tc.AddTarget(t)
}
func (c *controllerTargets) RemoveTarget(ctx context.Context, id string) error {
	return c.tc.RemoveTarget(ctx, id)
}
func (c *controllerTargets) Reset(ctx context.Context, id string) error { return c.tc.Reset(ctx, id) }

// fuzzEnv is an admin API over an in-memory store with one namespace, id: on the hub a
// namespace it made; on a peer a target with its replica imported.
type fuzzEnv struct {
	api   *API
	reg   *registry.Registry
	id    string
	close func()
}

func newFuzzEnv(t *testing.T, peer bool, token string) *fuzzEnv {
	role, side := registry.RoleHub, observer.SideHub
	if peer {
		role, side = registry.RolePeer, observer.SidePeer
	}
	st, err := persistence.NewMemoryStore(persistence.Options{Compactor: registry.Compactor(),
		ChangeFeed: &persistence.ChangeFeedOptions{StateVector: registry.FeedStateVector}})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New(registry.Config{Role: role, Catalog: st, Documents: st})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e := &fuzzEnv{reg: reg}
	opts := Options{Side: side, Registry: reg, Store: st, Token: token, MaxUpdateBytes: fuzzMaxUpdate,
		MaxEventStreams: 2, EventsKeepAlive: time.Hour, LeaseIdle: -1, Logger: slog.New(slog.DiscardHandler)}
	var tc *namespace.TargetController
	if peer {
		snap, err := fuzzSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		parts := bytes.SplitN(snap, []byte("|"), 3)
		e.id = string(parts[0])
		l, err := reg.Import(ctx, "default", e.id, registry.Identity{ReplicationID: string(parts[1]), Epoch: 1}, parts[2])
		if err != nil {
			t.Fatal(err)
		}
		l.Release()
		tc, err = namespace.NewTargetController(namespace.TargetControllerOptions{Registry: reg,
			Targets: []namespace.Target{{NamespaceID: e.id, Owner: "default"}}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		opts.Targets = &controllerTargets{tc: tc}
		opts.LocalWrites = tc // the peer's door for local writes
	} else {
		c, err := reg.Create(ctx, "default")
		if err != nil {
			t.Fatal(err)
		}
		e.id = c.NamespaceID
		opts.Changes = changefeed.StoreSource{Feed: st}
		opts.Versions = versions.New(versions.Options{Registry: reg, Store: st, Feed: opts.Changes, Config: st, MaxUpdateBytes: fuzzMaxUpdate})
		if _, err := opts.Versions.Take(ctx, "default", e.id, "first", persistence.VersionManual); err != nil {
			t.Fatal(err)
		}
	}
	if e.api, err = New(opts); err != nil {
		t.Fatal(err)
	}
	e.close = func() {
		e.api.Close()
		if tc != nil {
			tc.Close()
		}
		reg.Close(ctx)
		st.Close(ctx)
	}
	return e
}

// snapshot is what a refused request must leave as it was: the namespaces with their
// state vectors and epochs, and on a peer its targets.
func (e *fuzzEnv) snapshot(t *testing.T) string {
	var b strings.Builder
	for _, path := range []string{"/v1/namespaces", "/v1/namespaces/" + e.id, "/v1/namespaces/" + e.id + "/update", "/v1/targets"} {
		req := httptest.NewRequest("GET", "http://127.0.0.1:8788"+path, nil)
		req.Header.Set("Authorization", "Bearer "+e.api.opts.Token)
		rec := httptest.NewRecorder()
		e.api.ServeHTTP(rec, req)
		b.WriteString(path + " " + http.StatusText(rec.Code) + "\n")
		body := rec.Body.String()
		if strings.HasPrefix(path, "/v1/namespaces") && rec.Header().Get("Content-Type") == "application/json" {
			body = withoutVolatile(body)
		}
		b.WriteString(body + "\n")
	}
	return b.String()
}

// withoutVolatile drops the JSON keys that change without a change of state.
func withoutVolatile(body string) string {
	var v any
	if json.Unmarshal([]byte(body), &v) != nil {
		return body
	}
	var strip func(any)
	strip = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			delete(x, "loaded")        // whether a lease is cached
			delete(x, "documentBytes") // known once the document was loaded
			for _, y := range x {
				strip(y)
			}
		case []any:
			for _, y := range x {
				strip(y)
			}
		}
	}
	strip(v)
	b, _ := json.Marshal(v)
	return string(b)
}

// FuzzAdminAPI sends one request, built from the input, to the admin API of a hub or a
// peer over an in-memory store: any method, path (with {id} standing for the namespace
// that exists and {other} for one that does not), query, Content-Type, body and bearer
// token. The API must not panic; every answer of 400 or more is a JSON {"code","message"}
// whose code is one of the API's and whose status fits the code (never 500); a refused
// request (4xx) changes nothing; a JSON answer is JSON.
func FuzzAdminAPI(f *testing.F) {
	update := func(root string, kv map[string]any) []byte {
		doc := yjs.NewDoc()
		var out []byte
		unsub := doc.OnUpdate(func(u []byte, _ any) { out = append([]byte(nil), u...) })
		m := doc.GetMap(root)
		doc.Transact(nil, func(*yjs.Transaction) {
			for k, v := range kv {
				m.Set(k, v)
			}
		})
		unsub()
		return out
	}
	notes, meta := update("notes", map[string]any{"a": "b"}), update("meta", map[string]any{"replicationEpoch": 9.0})
	big := bytes.Repeat([]byte{1}, fuzzMaxUpdate+1)
	for _, side := range []uint8{0, 1} {
		for _, s := range []struct {
			method uint8
			path   string
			query  string
			ct     uint8
			body   []byte
		}{
			{0, "/healthz", "", 0, nil},
			{0, "/readyz", "", 0, nil},
			{0, "/metrics", "", 0, nil},
			{0, "/v1/namespaces", "", 0, nil},
			{1, "/v1/namespaces", "", 1, []byte(`{"owner":"default"}`)},
			{1, "/v1/namespaces", "", 1, []byte(`{"owner":""}`)},
			{1, "/v1/namespaces", "", 3, []byte(`{"owner":"x"}`)},
			{1, "/v1/namespaces", "", 1, []byte(`{"owner":"x","extra":1}`)},
			{1, "/v1/namespaces", "", 1, []byte(`{"owner":"x"} {}`)},
			{0, "/v1/namespaces/{id}", "", 0, nil},
			{0, "/v1/namespaces/{other}", "", 0, nil},
			{0, "/v1/namespaces/ns-1", "", 0, nil},
			{0, "/v1/namespaces/{id}/doc", "root=notes:map&root=t:text", 0, nil},
			{0, "/v1/namespaces/{id}/doc", "root=meta:array", 0, nil},
			{0, "/v1/namespaces/{id}/doc", "root=:bogus", 0, nil},
			{0, "/v1/namespaces/{id}/update", "sv=00", 0, nil},
			{0, "/v1/namespaces/{id}/update", "sv=zz", 0, nil},
			{0, "/v1/namespaces/{id}/update", "sv=0501", 0, nil},
			{1, "/v1/namespaces/{id}/update", "", 2, notes},
			{1, "/v1/namespaces/{id}/update", "", 2, meta},
			{1, "/v1/namespaces/{id}/update", "", 2, []byte{0, 0}},
			{1, "/v1/namespaces/{id}/update", "", 2, []byte{1, 1, 1, 1}},
			{1, "/v1/namespaces/{id}/update", "", 2, big},
			{1, "/v1/namespaces/{other}/update", "", 2, notes},
			{0, "/v1/namespaces/{id}/events", "state=1", 0, nil},
			{1, "/v1/namespaces/{id}/epoch", "", 1, []byte(`{"expectedEpoch":1}`)},
			{1, "/v1/namespaces/{id}/epoch", "", 1, []byte(`{"expectedEpoch":7}`)},
			{1, "/v1/namespaces/{id}/epoch", "", 1, []byte(`{"expectedEpoch":-1}`)},
			{2, "/v1/namespaces/{id}/schema", "", 1, []byte(`{"definition":{"type":"object"},"expectedFingerprint":""}`)},
			{2, "/v1/namespaces/{id}/schema", "", 1, []byte(`{"definition":[],"expectedFingerprint":"x"}`)},
			{0, "/v1/backup", "", 0, nil},
			{1, "/v1/namespaces/{id}/recreate", "", 2, notes},
			{1, "/v1/namespaces/{other}/recreate", "owner=default", 2, notes},
			{1, "/v1/namespaces/{other}/recreate", "", 2, nil},
			{0, "/v1/targets", "", 0, nil},
			{1, "/v1/targets", "", 1, []byte(`{"namespaceId":"{other}","owner":"default"}`)},
			{1, "/v1/targets", "", 1, []byte(`{"namespaceId":"{id}","owner":"someone"}`)},
			{3, "/v1/targets/{id}", "", 0, nil},
			{3, "/v1/targets/{other}", "", 0, nil},
			{1, "/v1/namespaces/{id}/reset", "", 0, nil},
			{4, "/v1/namespaces", "", 0, nil},
			{0, "/nowhere/%zz", "", 0, nil},
			{0, "/v1/namespaces/{id}/doc", "root=%ff", 0, nil},
			{0, "/v1/namespaces/{id}/doc", "maxBytes=1", 0, nil},
			{0, "/v1/namespaces/{id}/roots", "", 0, nil},
			{0, "/v1/status", "", 0, nil},
			{0, "/v1/status/stream", "interval=1", 0, nil},
			{0, "/v1/events", "", 0, nil},
			{0, "/v1/connections", "", 0, nil},
			{0, "/v1/changes", "after=0&wait=0s", 0, nil},
			{0, "/v1/changes", "after=99&wait=1ms", 0, nil},
			{0, "/v1/changes", "after=x", 0, nil},
			{0, "/v1/changes", "after=0&limit=0", 0, nil},
			{0, "/v1/changes", "after=0", 0, nil},
			{0, "/v1/changes/latest", "", 0, nil},
			{0, "/v1/webhooks", "", 0, nil},
			{1, "/v1/namespaces/{id}/versions", "", 1, []byte(`{"label":"x"}`)},
			{1, "/v1/namespaces/{id}/versions", "", 1, []byte(`{"label":1}`)},
			{0, "/v1/namespaces/{id}/versions", "", 0, nil},
			{0, "/v1/namespaces/{other}/versions", "", 0, nil},
			{0, "/v1/namespaces/{id}/versions/1", "", 0, nil},
			{0, "/v1/namespaces/{id}/versions/0/doc", "", 0, nil},
			{0, "/v1/namespaces/{id}/versions/1/doc", "root=notes:map", 0, nil},
			{0, "/v1/namespaces/{id}/versions/9/doc", "", 0, nil},
			{0, "/v1/namespaces/{id}/versions/1/update", "sv=zz", 0, nil},
			{0, "/v1/namespaces/{id}/versions/1/update", "sv=00", 0, nil},
			{1, "/v1/namespaces/{id}/versions/1/restore", "", 0, nil},
			{1, "/v1/namespaces/{id}/versions/7/restore", "", 0, nil},
			{0, "/", "", 0, nil},
		} {
			for _, auth := range []uint8{0, 2, 6, 8, 16, 32, 48} {
				f.Add(side|auth, s.method, s.path, s.query, s.ct, s.body)
			}
		}
	}
	f.Fuzz(func(t *testing.T, mode, method uint8, path, query string, ct uint8, body []byte) {
		// mode: bit 0 a peer (else the hub); bit 1 the API requires a token, bit 2 the
		// request carries it; bit 3 a Host that is not loopback; bits 4–5 what a browser
		// adds: nothing, its own Origin, another site's Origin, Sec-Fetch-Site cross-site.
		peer, needToken, sendToken := mode&1 == 1, mode&2 != 0, mode&4 != 0
		token := ""
		if needToken {
			token = "admin-token"
		}
		e := newFuzzEnv(t, peer, token)
		defer e.close()
		other := "ns-0123456789abcdef0123456789abcdef"
		expand := strings.NewReplacer("{id}", e.id, "{other}", other)
		target := expand.Replace(path)
		if query != "" {
			target += "?" + expand.Replace(query)
		}
		u, err := url.ParseRequestURI(target)
		if err != nil || !strings.HasPrefix(target, "/") {
			return // the HTTP server refuses such a request line before any handler
		}
		body = []byte(expand.Replace(string(body)))
		timeout := 5 * time.Second
		if strings.HasSuffix(u.Path, "/events") || strings.HasSuffix(u.Path, "/stream") || strings.HasSuffix(u.Path, "/changes") {
			timeout = 20 * time.Millisecond // a stream runs until the client leaves
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		host := "127.0.0.1:8788"
		if mode&8 != 0 {
			host = "rebind.example:8788"
		}
		req := (&http.Request{Method: fuzzMethods[int(method)%len(fuzzMethods)], URL: u, RequestURI: target, Proto: "HTTP/1.1",
			ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, Host: host, RemoteAddr: "127.0.0.1:1",
			Body: http.NoBody}).WithContext(ctx)
		switch (mode >> 4) & 3 {
		case 1:
			req.Header.Set("Origin", "http://"+host)
		case 2:
			req.Header.Set("Origin", "https://elsewhere.example")
		case 3:
			req.Header.Set("Sec-Fetch-Site", "cross-site")
		}
		if len(body) > 0 {
			req.Body, req.ContentLength = readCloser{bytes.NewReader(body)}, int64(len(body))
		}
		if c := fuzzContentTypes[int(ct)%len(fuzzContentTypes)]; c != "" {
			req.Header.Set("Content-Type", c)
		}
		if sendToken {
			req.Header.Set("Authorization", "Bearer admin-token")
		}
		before := e.snapshot(t)
		rec := httptest.NewRecorder()
		e.api.ServeHTTP(rec, req)

		status := rec.Code
		if status >= 500 && !slices.Contains([]int{http.StatusServiceUnavailable, http.StatusGatewayTimeout}, status) {
			t.Fatalf("%s %s: status %d: %s", req.Method, target, status, rec.Body.Bytes())
		}
		if status >= 400 {
			var er struct {
				Code, Message string
				// Only CURSOR_EXPIRED carries more: the list to start over from.
				Cursor     *string
				Namespaces []json.RawMessage
			}
			dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&er); err != nil || er.Code == "" || er.Message == "" ||
				((er.Cursor != nil || er.Namespaces != nil) != (er.Code == CodeCursorExpired)) ||
				rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("%s %s: %d answered %q (%s): not a JSON error", req.Method, target, status, rec.Body.Bytes(), rec.Header().Get("Content-Type"))
			}
			if !slices.Contains(fuzzStatuses[er.Code], status) {
				t.Fatalf("%s %s: code %s with status %d (allowed %v)", req.Method, target, er.Code, status, fuzzStatuses[er.Code])
			}
			if needToken && !sendToken && !e.api.public(req) && er.Code != CodeUnauthorized && er.Code != CodeCrossOrigin {
				t.Fatalf("%s %s without the admin token: %d %s", req.Method, target, status, er.Code)
			}
		} else if needToken && !sendToken && !e.api.public(req) {
			t.Fatalf("%s %s without the admin token: %d", req.Method, target, status)
		}
		if status < 400 && !needToken && mode&8 != 0 {
			t.Fatalf("%s %s to Host %s without an admin token was answered %d", req.Method, target, host, status)
		}
		if status >= 400 && status < 500 {
			if after := e.snapshot(t); after != before {
				t.Fatalf("%s %s was refused (%d %s) but changed the state:\nbefore %s\nafter %s", req.Method, target, status, rec.Body.Bytes(), before, after)
			}
		}
		if status < 300 && rec.Header().Get("Content-Type") == "application/json" && !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s %s: %d with a body that is not JSON: %q", req.Method, target, status, rec.Body.Bytes())
		}
	})
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// Every error code the API defines (the Code constants of errors.go, read from the source)
// has a status in FuzzAdminAPI's table — but INTERNAL_ERROR, which must never be answered
// to an input: a code added later cannot pass the fuzz target unchecked.
func TestFuzzTableCoversEveryCode(t *testing.T) {
	fset := token.NewFileSet()
	parsed := map[string]*ast.File{}
	for _, name := range []string{"errors.go", "fuzz_test.go"} {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed[name] = f
	}
	var defined []string
	for _, d := range parsed["errors.go"].Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
			for _, spec := range g.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Code") {
						defined = append(defined, n.Name)
					}
				}
			}
		}
	}
	keys := map[string]bool{}
	ast.Inspect(parsed["fuzz_test.go"], func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Names) == 1 && vs.Names[0].Name == "fuzzStatuses" {
			for _, elt := range vs.Values[0].(*ast.CompositeLit).Elts {
				keys[elt.(*ast.KeyValueExpr).Key.(*ast.Ident).Name] = true
			}
		}
		return true
	})
	if len(defined) < 20 {
		t.Fatalf("read %d codes from errors.go: the scan is broken", len(defined))
	}
	for _, c := range defined {
		if c == "CodeInternal" {
			if keys[c] {
				t.Error("INTERNAL_ERROR is in the table: a 500 would pass the fuzz target")
			}
			continue
		}
		if !keys[c] {
			t.Errorf("%s has no status in fuzzStatuses", c)
		}
	}
}
