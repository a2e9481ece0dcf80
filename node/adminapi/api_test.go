package adminapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/yjs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type env struct {
	t     *testing.T
	store *persistence.MemoryStore
	reg   *registry.Registry
	api   *API
	srv   *httptest.Server
	token string
}

func newRegistry(t testing.TB, role registry.Role) (*persistence.MemoryStore, *registry.Registry) {
	t.Helper()
	st, err := persistence.NewMemoryStore(persistence.Options{Compactor: registry.Compactor()})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New(registry.Config{Role: role, Catalog: st, Documents: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		reg.Close(context.Background())
		st.Close(context.Background())
	})
	return st, reg
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	role := registry.RoleHub
	if opts.Side == observer.SidePeer {
		role = registry.RolePeer
	}
	if opts.Registry == nil {
		opts.Store, opts.Registry = newRegistry(t, role)
	}
	api, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(func() { api.Close(); srv.Close() })
	st, _ := opts.Store.(*persistence.MemoryStore)
	return &env{t: t, store: st, reg: opts.Registry, api: api, srv: srv, token: opts.Token}
}

// do sends a request and returns the status and body.
func (e *env) do(method, path string, body []byte) (int, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	switch {
	case strings.HasSuffix(path, "/update"):
		req.Header.Set("Content-Type", "application/octet-stream")
	case len(body) > 0:
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// wantError checks an error answer's status and JSON code.
func (e *env) wantError(method, path string, body []byte, status int, code string) {
	e.t.Helper()
	got, b := e.do(method, path, body)
	var er struct{ Code, Message string }
	if err := json.Unmarshal(b, &er); err != nil || got != status || er.Code != code || er.Message == "" {
		e.t.Errorf("%s %s = %d %s; want %d %s", method, path, got, b, status, code)
	}
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}

// mapUpdate returns a Yjs update that sets root map keys on top of state (the way an
// application writes: from the current document).
func mapUpdate(t *testing.T, state []byte, root string, kv map[string]any) []byte {
	t.Helper()
	doc := yjs.NewDoc()
	if len(state) > 0 {
		if err := yjs.ApplyUpdate(doc, state, nil); err != nil {
			t.Fatal(err)
		}
	}
	var out []byte
	unsub := doc.OnUpdate(func(u []byte, _ any) { out = append([]byte(nil), u...) })
	defer unsub()
	m := doc.GetMap(root)
	doc.Transact(nil, func(*yjs.Transaction) {
		for k, v := range kv {
			if err := m.Set(k, v); err != nil {
				t.Fatal(err)
			}
		}
	})
	return out
}

func (e *env) create() Created {
	e.t.Helper()
	status, b := e.do("POST", "/v1/namespaces", nil)
	if status != http.StatusCreated {
		e.t.Fatalf("create: %d %s", status, b)
	}
	return decode[Created](e.t, b)
}

func TestHubNamespaceRoutes(t *testing.T) {
	e := newEnv(t, Options{Side: observer.SideHub, MaxUpdateBytes: 4096})
	c := e.create()
	if !registry.ValidNamespaceID(c.NamespaceID) || !registry.ValidReplicationID(c.ReplicationID) || c.ReplicationEpoch != 1 {
		t.Fatalf("created %+v", c)
	}
	status, b := e.do("POST", "/v1/namespaces", []byte(`{"owner":"team-b"}`))
	if status != http.StatusCreated {
		t.Fatalf("create with owner: %d %s", status, b)
	}
	other := decode[Created](t, b)
	e.wantError("POST", "/v1/namespaces", []byte(`{"owner":""}`), 400, CodeBadRequest)
	e.wantError("POST", "/v1/namespaces", []byte(`{"ownr":"x"}`), 400, CodeBadRequest)
	e.wantError("POST", "/v1/namespaces", []byte(`{"owner":"x"} {}`), 400, CodeBadRequest)

	// The list, without loading documents.
	status, b = e.do("GET", "/v1/namespaces", nil)
	list := decode[[]Status](t, b)
	if status != 200 || len(list) != 2 {
		t.Fatalf("list: %d %s", status, b)
	}
	for _, s := range list {
		if s.State != StateActive || (s.NamespaceID == other.NamespaceID) != (s.Owner == "team-b") {
			t.Fatalf("list entry %+v", s)
		}
	}

	// Status: identity, state vector, sessions.
	path := "/v1/namespaces/" + c.NamespaceID
	status, b = e.do("GET", path, nil)
	st := decode[map[string]any](t, b)
	if status != 200 || st["replicationId"] != c.ReplicationID || st["replicationEpoch"] != 1.0 || st["state"] != StateActive {
		t.Fatalf("status: %d %s", status, b)
	}
	if _, err := hex.DecodeString(st["stateVector"].(string)); err != nil {
		t.Fatalf("stateVector is not hex: %s", b)
	}

	// A write through the sequencer, then read back three ways.
	_, state := e.do("GET", path+"/update", nil)
	if status, b := e.do("POST", path+"/update", mapUpdate(t, state, "notes", map[string]any{"greeting": "hello"})); status != http.StatusNoContent {
		t.Fatalf("write: %d %s", status, b)
	}
	status, b = e.do("GET", path+"/doc", nil)
	doc := decode[map[string]any](t, b)
	if status != 200 || doc["notes"].(map[string]any)["greeting"] != "hello" {
		t.Fatalf("doc: %d %s", status, b)
	}
	if meta := doc["meta"].(map[string]any); meta["replicationId"] != c.ReplicationID {
		t.Fatalf("doc meta: %s", b)
	}
	status, b = e.do("GET", path+"/doc?root=notes:map", nil)
	if doc := decode[map[string]any](t, b); status != 200 || len(doc) != 1 || doc["notes"] == nil {
		t.Fatalf("doc with a root: %d %s", status, b)
	}
	e.wantError("GET", path+"/doc?root=notes:tree", nil, 400, CodeBadRequest)
	e.wantError("GET", path+"/doc?root=notes:map,notes:array", nil, 400, CodeBadRequest)

	// The update relative to a state vector is what that state lacks.
	st1 := decode[map[string]any](t, func() []byte { _, b := e.do("GET", path, nil); return b }())
	status, diff := e.do("GET", path+"/update?sv="+st1["stateVector"].(string), nil)
	if status != 200 {
		t.Fatalf("diff: %d", status)
	}
	full := yjs.NewDoc()
	_, all := e.do("GET", path+"/update", nil)
	yjs.ApplyUpdate(full, all, nil)
	before := yjs.NewDoc()
	yjs.ApplyUpdate(before, all, nil)
	yjs.ApplyUpdate(before, diff, nil)
	if !bytes.Equal(before.EncodeStateVector(), full.EncodeStateVector()) {
		t.Fatal("the diff at the current state vector changed the state")
	}
	e.wantError("GET", path+"/update?sv=zz", nil, 400, CodeBadRequest)
	e.wantError("GET", path+"/update?sv=ff", nil, 400, CodeApplyFailed)

	// Refusals: protected meta, malformed, too large, unknown and malformed ids.
	e.wantError("POST", path+"/update", mapUpdate(t, all, "meta", map[string]any{"replicationEpoch": 9}), 409, CodeProtected)
	e.wantError("POST", path+"/update", []byte{0xff, 0x01}, 400, CodeApplyFailed)
	e.wantError("POST", path+"/update", make([]byte, 4097), 413, CodeUpdateTooLarge)
	e.wantError("GET", "/v1/namespaces/ns-00000000000000000000000000000000", nil, 404, CodeNamespaceNotFound)
	e.wantError("GET", "/v1/namespaces/ns-xyz/doc", nil, 400, CodeBadRequest)
	_, b = e.do("GET", path+"/doc?root=notes:map", nil)
	if doc := decode[map[string]any](t, b); len(doc["notes"].(map[string]any)) != 1 {
		t.Fatalf("a refused write changed the document: %s", b)
	}

	// Epoch bump (hub only), naming the epoch it replaces.
	status, b = e.do("POST", path+"/epoch", []byte(`{"expectedEpoch":1}`))
	if status != 200 || decode[map[string]any](t, b)["replicationEpoch"] != 2.0 {
		t.Fatalf("epoch: %d %s", status, b)
	}

	// Routes of the other side, unknown routes, wrong methods: JSON errors.
	e.wantError("GET", "/v1/targets", nil, 404, CodeNotFound)
	e.wantError("POST", path+"/reset", nil, 404, CodeNotFound)
	e.wantError("PUT", path, nil, 405, CodeMethodNotAllowed)
	e.wantError("GET", "/nope", nil, 404, CodeNotFound)
	// A delete must name the epoch; a wrong one changes nothing; then the namespace is gone.
	e.wantError("DELETE", path, nil, 400, CodeBadRequest)
	e.wantError("DELETE", path+"?expectedEpoch=1", nil, 409, CodeEpochMismatch) // bumped to 2 above
	if status, b := e.do("DELETE", path+"?expectedEpoch=2", nil); status != 204 {
		t.Fatalf("delete: %d %s", status, b)
	}
	e.wantError("GET", path, nil, 404, CodeNamespaceDeleted)
	e.wantError("DELETE", path+"?expectedEpoch=2", nil, 404, CodeNamespaceDeleted)
}

// TestHubSchemaReplace: PUT /v1/namespaces/{id}/schema replaces meta.schema; the namespace
// shows the active schema's fingerprint and updatedAt (stamped by the hub's clock when the
// request has none); a definition that is not a JSON object, or a bad updatedAt, is refused
// and changes nothing.
func TestHubSchemaReplace(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	e := newEnv(t, Options{Side: observer.SideHub, Clock: clk})
	path := "/v1/namespaces/" + e.create().NamespaceID
	if _, b := e.do("GET", path, nil); decode[map[string]any](t, b)["schema"] != nil {
		t.Fatalf("a schema before any was set: %s", b)
	}
	// The fingerprint of this definition comes from the JS generator of the registry's
	// vectors (registry/testdata/fingerprint/vectors.json, "flat").
	const fp = "sha256:v1:09dbb49948fae214c76b743260f8c4a9b27d2066815b60d3efdc657b6d8d0c58"
	status, b := e.do("PUT", path+"/schema", []byte(`{"definition":{"version":3,"title":"Note","type":"object","required":true},"expectedFingerprint":""}`))
	got := decode[map[string]any](t, b)
	if status != 200 || got["semanticFingerprint"] != fp || got["updatedAt"] != "2026-11-29T10:00:00.000Z" {
		t.Fatalf("replace: %d %s", status, b)
	}
	status, b = e.do("PUT", path+"/schema", []byte(`{"definition":{"type":"object"},"updatedAt":"2026-11-29T11:00:00Z","expectedFingerprint":"`+fp+`"}`))
	if status != 200 || decode[map[string]any](t, b)["updatedAt"] != "2026-11-29T11:00:00Z" {
		t.Fatalf("replace with updatedAt: %d %s", status, b)
	}
	for _, body := range []string{`{"definition":[1]}`, `{"definition":"x"}`, `{"definition":null}`, `{}`,
		`{"definition":{},"updatedAt":"yesterday","expectedFingerprint":""}`, `{"definition":{"type":"object"}}`} {
		e.wantError("PUT", path+"/schema", []byte(body), 400, CodeBadRequest)
	}
	_, b = e.do("GET", path, nil)
	schema, _ := decode[map[string]any](t, b)["schema"].(map[string]any)
	if schema["updatedAt"] != "2026-11-29T11:00:00Z" {
		t.Fatalf("status after the refusals: %s", b)
	}
	_, b = e.do("GET", path+"/doc?root=meta:map", nil)
	meta := decode[map[string]any](t, b)["meta"].(map[string]any)
	if def := meta["schema"].(map[string]any)["definition"].(map[string]any); def["type"] != "object" || len(def) != 1 {
		t.Fatalf("meta.schema %v", meta["schema"])
	}
	e.wantError("PUT", "/v1/namespaces/ns-00000000000000000000000000000000/schema", []byte(`{"definition":{},"expectedFingerprint":""}`), 404, CodeNamespaceNotFound)
}

func TestArchivedNamespace(t *testing.T) {
	e := newEnv(t, Options{Side: observer.SideHub})
	c := e.create()
	if _, err := e.reg.Archive(context.Background(), "default", c.NamespaceID); err != nil {
		t.Fatal(err)
	}
	status, b := e.do("GET", "/v1/namespaces/"+c.NamespaceID, nil)
	if st := decode[Status](t, b); status != 200 || st.State != StateArchived || st.ReplicationID != "" {
		t.Fatalf("archived status: %d %s", status, b)
	}
	e.wantError("GET", "/v1/namespaces/"+c.NamespaceID+"/doc", nil, 404, CodeNamespaceNotFound)
}

// unreachableEntries is a store that cannot read entries now, as a hub cluster node
// without quorum cannot read one it has not read before.
type unreachableEntries struct{ persistence.Store }

func (unreachableEntries) Entry(context.Context, string) (persistence.Entry, error) {
	return persistence.Entry{}, fmt.Errorf("reading a namespace entry: %w", persistence.ErrUnavailable)
}

// A namespace whose entry the store cannot read now is answered 503 PERSISTENCE_DEGRADED —
// reads and writes alike, at once — not as an internal error.
func TestUnreachableStoreIsDegraded(t *testing.T) {
	st, reg := newRegistry(t, registry.RoleHub)
	e := newEnv(t, Options{Side: observer.SideHub, Registry: reg, Store: unreachableEntries{st}})
	const ns = "/v1/namespaces/ns-0123456789abcdef0123456789abcdef"
	e.wantError("GET", ns+"/update", nil, 503, CodeDegraded)
	e.wantError("POST", ns+"/update", []byte{0, 0}, 503, CodeDegraded)
}

func TestAdminToken(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "nomicore_x 1\n") })
	e := newEnv(t, Options{Side: observer.SideHub, Token: "s3cret", Metrics: metrics, Ready: func() error { return nil }})
	e.token = ""
	e.wantError("GET", "/v1/namespaces", nil, 401, CodeUnauthorized)
	e.wantError("GET", "/metrics", nil, 401, CodeUnauthorized)
	e.token = "wrong"
	e.wantError("POST", "/v1/namespaces", nil, 401, CodeUnauthorized)
	for _, p := range []string{"/healthz", "/readyz"} {
		if status, _ := e.do("GET", p, nil); status != 200 {
			t.Errorf("%s needs no token: %d", p, status)
		}
	}
	e.token = "s3cret"
	if status, b := e.do("GET", "/metrics", nil); status != 200 || string(b) != "nomicore_x 1\n" {
		t.Fatalf("metrics: %d %s", status, b)
	}
	if status, _ := e.do("GET", "/v1/namespaces", nil); status != 200 {
		t.Fatalf("with the token: %d", status)
	}
}

func TestReadyz(t *testing.T) {
	var notReady error = io.EOF
	var mu sync.Mutex
	e := newEnv(t, Options{Side: observer.SideHub, Ready: func() error { mu.Lock(); defer mu.Unlock(); return notReady }})
	status, b := e.do("GET", "/readyz", nil)
	if m := decode[map[string]any](t, b); status != 503 || m["ready"] != false || m["reason"] != "EOF" {
		t.Fatalf("not ready: %d %s", status, b)
	}
	mu.Lock()
	notReady = nil
	mu.Unlock()
	status, b = e.do("GET", "/readyz", nil)
	if m := decode[map[string]any](t, b); status != 200 || m["ready"] != true || m["persistence"] != "healthy" {
		t.Fatalf("ready: %d %s", status, b)
	}
	e.wantError("GET", "/metrics", nil, 404, CodeNotFound)
}

// sse reads Server-Sent Events.
type sse struct {
	r *bufio.Reader
}

type event struct {
	name string
	data []byte
}

func (s *sse) next(t *testing.T) event {
	t.Helper()
	var ev event
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if ev.name != "" || ev.data != nil {
				return ev
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			ev.name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			d, err := base64.StdEncoding.DecodeString(line[len("data: "):])
			if err != nil {
				t.Fatalf("data is not base64: %q", line)
			}
			ev.data = append(d, []byte{}...)
		}
	}
}

func TestEventsStreamAppliedUpdates(t *testing.T) {
	e := newEnv(t, Options{Side: observer.SideHub})
	c := e.create()
	path := "/v1/namespaces/" + c.NamespaceID
	_, state := e.do("GET", path+"/update", nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+path+"/events?state=1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &sse{bufio.NewReader(resp.Body)}
	if ev := s.next(t); ev.name != "state" || !bytes.Equal(ev.data, state) {
		t.Fatalf("first event %q (%d bytes), want the state", ev.name, len(ev.data))
	}
	// Each write is followed by one event: the update the sequencer applied (the written
	// update as integrated, with whatever it deleted). Replaying the events on the first
	// state gives the server's document.
	replay := yjs.NewDoc()
	yjs.ApplyUpdate(replay, state, nil)
	for i := range 3 {
		u := mapUpdate(t, state, "notes", map[string]any{"k": float64(i), "w" + string(rune('0'+i)): true})
		if status, b := e.do("POST", path+"/update", u); status != 204 {
			t.Fatalf("write: %d %s", status, b)
		}
		ev := s.next(t)
		if ev.name != "" || len(ev.data) == 0 {
			t.Fatalf("event %d: %q (%d bytes)", i, ev.name, len(ev.data))
		}
		if err := yjs.ApplyUpdate(replay, ev.data, nil); err != nil {
			t.Fatalf("event %d does not apply: %v", i, err)
		}
	}
	_, final := e.do("GET", path+"/update", nil)
	server := yjs.NewDoc()
	yjs.ApplyUpdate(server, final, nil)
	if !bytes.Equal(replay.EncodeStateVector(), server.EncodeStateVector()) {
		t.Fatal("the events replayed on the state do not reach the server's state")
	}
	got, _ := json.Marshal(replay.GetMap("notes").ToJSON())
	want, _ := json.Marshal(server.GetMap("notes").ToJSON())
	if !bytes.Equal(got, want) || !strings.Contains(string(got), `"w2":true`) {
		t.Fatalf("replayed %s, server %s", got, want)
	}
	// Shutdown ends the stream with `event: closed`.
	e.api.Close()
	if ev := s.next(t); ev.name != "closed" {
		t.Fatalf("at close: %q", ev.name)
	}
}

// blockingWriter is a ResponseWriter whose first body write waits for release: a stalled
// stream client.
type blockingWriter struct {
	header  http.Header
	release chan struct{}
	mu      sync.Mutex
	body    bytes.Buffer
	once    sync.Once
	started chan struct{}
}

func (w *blockingWriter) Header() http.Header { return w.header }
func (w *blockingWriter) WriteHeader(int)     {}
func (w *blockingWriter) Flush()              {}
func (w *blockingWriter) Write(b []byte) (int, error) {
	w.once.Do(func() { close(w.started); <-w.release })
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.body.Write(b)
}

// A client that stalls while updates keep coming loses its stream (event: overflow), never
// memory: the queue is bounded.
func TestEventsOverflowEndsTheStream(t *testing.T) {
	e := newEnv(t, Options{Side: observer.SideHub, EventsMaxQueuedCount: 2})
	c := e.create()
	path := "/v1/namespaces/" + c.NamespaceID
	_, state := e.do("GET", path+"/update", nil)
	w := &blockingWriter{header: http.Header{}, release: make(chan struct{}), started: make(chan struct{})}
	req := httptest.NewRequest("GET", "http://127.0.0.1"+path+"/events", nil)
	done := make(chan struct{})
	go func() { defer close(done); e.api.ServeHTTP(w, req) }()
	<-w.started // the handler watches and is stuck writing to the client
	for i := range 5 {
		if status, b := e.do("POST", path+"/update", mapUpdate(t, state, "notes", map[string]any{"k": float64(i)})); status != 204 {
			t.Fatalf("write: %d %s", status, b)
		}
	}
	close(w.release)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end after its queue overflowed")
	}
	if !strings.HasSuffix(w.body.String(), "event: overflow\ndata: \n\n") {
		t.Fatalf("stream ended with %q", w.body.String())
	}
}

// An idle event stream carries a keep-alive comment every EventsKeepAlive of the injected
// clock.
func TestEventsKeepAlive(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	e := newEnv(t, Options{Side: observer.SideHub, Clock: clk, LeaseIdle: -1, EventsKeepAlive: time.Minute})
	c := e.create()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/namespaces/"+c.NamespaceID+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	nextComment := func() string {
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("stream ended: %v", err)
			}
			if line = strings.TrimRight(line, "\n"); line != "" {
				return line
			}
		}
	}
	if got := nextComment(); got != ": nomicore events" {
		t.Fatalf("the stream opens with %q", got)
	}
	for i := range 2 {
		if !clk.WaitForTimers(1, 10*time.Second) {
			t.Fatalf("keep-alive %d: no timer armed", i)
		}
		clk.Advance(time.Minute)
		if got := nextComment(); got != ": keep-alive" {
			t.Fatalf("keep-alive %d: got %q", i, got)
		}
	}
}

func TestEventsStreamLimit(t *testing.T) {
	e := newEnv(t, Options{Side: observer.SideHub, MaxEventStreams: 1})
	c := e.create()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/namespaces/"+c.NamespaceID+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	bufio.NewReader(resp.Body).ReadString('\n') // the stream is running
	e.wantError("GET", "/v1/namespaces/"+c.NamespaceID+"/events", nil, 503, CodeTooManyStreams)
}

// fakeTargets is a target list for the peer routes.
type fakeTargets struct {
	mu     sync.Mutex
	list   map[string]namespace.TargetStatus
	resets []string
}

func (f *fakeTargets) Targets() []namespace.TargetStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []namespace.TargetStatus
	for _, t := range f.list {
		out = append(out, t)
	}
	return out
}

func (f *fakeTargets) Target(id string) (namespace.TargetStatus, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.list[id]
	return t, ok
}

func (f *fakeTargets) AddTarget(_ context.Context, t namespace.Target) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur, ok := f.list[t.NamespaceID]; ok {
		if cur.Owner != t.Owner {
			return false, namespace.ErrTargetConflict
		}
		return false, nil
	}
	f.list[t.NamespaceID] = namespace.TargetStatus{Target: t, State: observer.ChannelTargeted}
	return true, nil
}

func (f *fakeTargets) RemoveTarget(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.list[id]; !ok {
		return namespace.ErrUnknownTarget
	}
	delete(f.list, id)
	return nil
}

func (f *fakeTargets) Reset(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resets = append(f.resets, id)
	return nil
}

func (f *fakeTargets) set(id string, state observer.ChannelState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.list[id]
	t.State = state
	f.list[id] = t
}

func TestPeerRoutes(t *testing.T) {
	// A hub registry makes a namespace; the peer imports its snapshot as a replica.
	_, hubReg := newRegistry(t, registry.RoleHub)
	ctx := context.Background()
	c, err := hubReg.Create(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	hl, err := hubReg.Open(ctx, "default", c.NamespaceID)
	if err != nil {
		t.Fatal(err)
	}
	snapshot, _ := hl.EncodeState(ctx, nil)
	hl.Release()

	targets := &fakeTargets{list: map[string]namespace.TargetStatus{}}
	e := newEnv(t, Options{Side: observer.SidePeer, Targets: targets})
	ns := c.NamespaceID
	path := "/v1/namespaces/" + ns

	status, b := e.do("POST", "/v1/targets", []byte(`{"namespaceId":"`+ns+`"}`))
	if tj := decode[TargetJSON](t, b); status != 201 || tj.Owner != "default" || tj.State != "targeted" {
		t.Fatalf("add target: %d %s", status, b)
	}
	if status, _ := e.do("POST", "/v1/targets", []byte(`{"namespaceId":"`+ns+`","owner":"default"}`)); status != 200 {
		t.Fatalf("adding it again: %d", status)
	}
	e.wantError("POST", "/v1/targets", []byte(`{"namespaceId":"`+ns+`","owner":"other"}`), 409, CodeTargetConflict)
	e.wantError("POST", "/v1/targets", []byte(`{"namespaceId":"ns-1"}`), 400, CodeBadRequest)

	// Not bootstrapped yet: the status has the state only; the document is 503.
	status, b = e.do("GET", path, nil)
	if st := decode[Status](t, b); status != 200 || st.State != "targeted" || st.ReplicationID != "" {
		t.Fatalf("status before bootstrap: %d %s", status, b)
	}
	e.wantError("GET", path+"/doc", nil, 503, CodeNotBootstrapped)
	e.wantError("POST", path+"/update", mapUpdate(t, snapshot, "notes", map[string]any{"a": 1.0}), 503, CodeNotBootstrapped)

	// Bootstrapped and live: reads and writes.
	l, err := e.reg.Import(ctx, "default", ns, registry.Identity{ReplicationID: c.Identity.ReplicationID, Epoch: 1}, snapshot)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	targets.set(ns, observer.ChannelLive)
	status, b = e.do("GET", path, nil)
	if st := decode[Status](t, b); status != 200 || st.State != "live" || st.ReplicationID != c.Identity.ReplicationID || st.StateVector == "" {
		t.Fatalf("status: %d %s", status, b)
	}
	if status, b := e.do("POST", path+"/update", mapUpdate(t, snapshot, "notes", map[string]any{"a": 1.0})); status != 204 {
		t.Fatalf("write: %d %s", status, b)
	}
	// A peer refuses meta writes too.
	e.wantError("POST", path+"/update", mapUpdate(t, snapshot, "meta", map[string]any{"x": 1.0}), 409, CodeProtected)
	// Conflicted: writes refused until reset; reads still served.
	targets.set(ns, observer.ChannelConflicted)
	e.wantError("POST", path+"/update", mapUpdate(t, snapshot, "notes", map[string]any{"b": 1.0}), 409, CodeConflicted)
	if status, _ := e.do("GET", path+"/doc", nil); status != 200 {
		t.Fatalf("reading a conflicted replica: %d", status)
	}
	if status, b := e.do("POST", path+"/reset", nil); status != 200 || len(targets.resets) != 1 {
		t.Fatalf("reset: %d %s", status, b)
	}
	e.wantError("POST", "/v1/namespaces/ns-00000000000000000000000000000000/reset", nil, 404, CodeNamespaceNotFound)

	// The list holds targets and leftover replicas; hub-only routes are absent.
	status, b = e.do("GET", "/v1/namespaces", nil)
	if list := decode[[]Status](t, b); status != 200 || len(list) != 1 || list[0].NamespaceID != ns {
		t.Fatalf("list: %d %s", status, b)
	}
	e.wantError("POST", "/v1/namespaces", nil, 405, CodeMethodNotAllowed)
	e.wantError("POST", path+"/epoch", nil, 404, CodeNotFound)

	if status, _ := e.do("DELETE", "/v1/targets/"+ns, nil); status != 204 {
		t.Fatalf("remove: %d", status)
	}
	e.wantError("DELETE", "/v1/targets/"+ns, nil, 404, CodeNamespaceNotFound)
	// The replica stays readable as a closed namespace.
	status, b = e.do("GET", path, nil)
	if st := decode[Status](t, b); status != 200 || st.State != "closed" {
		t.Fatalf("leftover replica: %d %s", status, b)
	}
	status, b = e.do("GET", "/v1/targets", nil)
	if status != 200 || strings.TrimSpace(string(b)) != "[]" {
		t.Fatalf("targets: %d %s", status, b)
	}
}

func TestNewRefusesIncompleteOptions(t *testing.T) {
	st, reg := newRegistry(t, registry.RolePeer)
	for _, o := range []Options{
		{Side: observer.SideHub},
		{Side: observer.SidePeer, Registry: reg, Store: st},
		{Side: "edge", Registry: reg, Store: st},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) succeeded", o)
		}
	}
}
