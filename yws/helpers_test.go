package yws

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/internal/testkit/oracle"
	"github.com/nomicore/nomicore/lib0"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/yjs"
)

// TestMain runs the tests, stops the JS oracle some of them start, then looks for leaked
// goroutines.
func TestMain(m *testing.M) {
	code := oracle.Run(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// tokenTable is the node's static client-token table (auth.ClientTable), whose tokens a
// test sets and removes by hand.
type tokenTable struct {
	auth.ClientTable

	mu      sync.Mutex // guards entries
	entries map[string]auth.ClientEntry
}

func (tt *tokenTable) set(token string, g auth.ClientGrant) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tt.entries[token] = auth.ClientEntry{Name: g.Name, TokenSHA256: auth.HashToken(token), Namespaces: g.Namespaces, ReadOnly: g.ReadOnly}
	tt.Replace(slices.Collect(maps.Values(tt.entries)))
}

func (tt *tokenTable) remove(token string) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	delete(tt.entries, token)
	tt.Replace(slices.Collect(maps.Values(tt.entries)))
}

// env is a hub registry over a memory store, one namespace, and the editor endpoint on a
// loopback test server.
type env struct {
	t      testing.TB
	reg    *registry.Registry
	srv    *Server
	http   *httptest.Server
	ns     string
	tokens *tokenTable
	prom   *prometheus.Registry
}

func newEnv(t testing.TB, tweak func(*Options)) *env {
	t.Helper()
	st, err := persistence.NewMemoryStore(persistence.Options{Compactor: registry.Compactor()})
	if err != nil {
		t.Fatal(err)
	}
	return newEnvOn(t, st, tweak)
}

// newEnvOn is newEnv over a store of the caller's (closed with the env).
func newEnvOn(t testing.TB, st persistence.Store, tweak func(*Options)) *env {
	t.Helper()
	reg, err := registry.New(registry.Config{Role: registry.RoleHub, Catalog: st, Documents: st})
	if err != nil {
		t.Fatal(err)
	}
	created, err := reg.Create(context.Background(), "default")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, reg: reg, ns: created.NamespaceID, tokens: &tokenTable{entries: map[string]auth.ClientEntry{}},
		prom: prometheus.NewRegistry()}
	e.tokens.set("writer", auth.ClientGrant{Name: "writer", Namespaces: []string{"*"}})
	e.tokens.set("reader", auth.ClientGrant{Name: "reader", Namespaces: []string{"*"}, ReadOnly: true})
	e.tokens.set("other", auth.ClientGrant{Name: "other", Namespaces: []string{"ns-00000000000000000000000000000000"}})
	m, err := NewMetrics(e.prom, "hub")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Registry: reg, Clients: e.tokens, Metrics: m,
		Namespaces: func(ctx context.Context, id string) (string, error) {
			if _, err := st.Entry(ctx, id); errors.Is(err, persistence.ErrNotFound) {
				return "", ErrUnknownNamespace
			} else if err != nil {
				return "", err
			}
			return "default", nil
		}}
	if tweak != nil {
		tweak(&opts)
	}
	e.srv, err = New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.http = httptest.NewServer(e.srv)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		e.http.Close()
		reg.Close(ctx)
		st.Close(ctx)
	})
	return e
}

func (e *env) url(ns, token string) string {
	u := "ws" + strings.TrimPrefix(e.http.URL, "http") + "/v1/yjs/" + ns
	if token != "" {
		u += "?token=" + token
	}
	return u
}

// metric reads one series of the endpoint's metrics.
func (e *env) metric(name string, labels ...string) float64 {
	e.t.Helper()
	return e.metricFor(e.t, name, labels...)
}

// metricFor is metric failing t (a fuzz target's, not the env's) on an error.
func (e *env) metricFor(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := e.prom.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			if m.Gauge != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

var _ = testutil.ToFloat64

// client is an in-process editor: a Yjs document synced over the y-websocket protocol.
type client struct {
	t    testing.TB
	ws   *websocket.Conn
	doc  *yjs.Doc
	mu   sync.Mutex // guards doc, msgs and err: the read loop and the test use them
	msgs []Message  // every message received, in order
	err  error      // the read loop's end
	wake chan struct{}
	done chan struct{}
}

func (e *env) dial(token string) *client {
	e.t.Helper()
	c, err := e.tryDial(e.ns, token)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *env) tryDial(ns, token string) (*client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, e.url(ns, token), nil)
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(64 << 20)
	c := &client{t: e.t, ws: ws, doc: yjs.NewDoc(), wake: make(chan struct{}, 1), done: make(chan struct{})}
	go c.read()
	e.t.Cleanup(func() { ws.CloseNow(); <-c.done })
	return c, nil
}

// read applies what a provider applies (sync updates, answers to SyncStep1) and records
// every message.
func (c *client) read() {
	defer close(c.done)
	for {
		_, b, err := c.ws.Read(context.Background())
		if err != nil {
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
			signal(c.wake)
			return
		}
		m, err := decodeServerMessage(b)
		if err != nil {
			c.mu.Lock()
			c.err = fmt.Errorf("the node sent a bad message: %v", err)
			c.mu.Unlock()
			signal(c.wake)
			return
		}
		if m.Type == TypeSync {
			switch m.Sync {
			case SyncStep1:
				c.mu.Lock() // the test may be editing c.doc (under mu) at the same time
				diff, _ := yjs.EncodeStateAsUpdate(c.doc, m.Payload)
				c.mu.Unlock()
				c.write(AppendSync(nil, SyncStep2, diff))
			default:
				c.mu.Lock()
				err := yjs.ApplyUpdate(c.doc, m.Payload, "remote")
				c.mu.Unlock()
				if err != nil {
					c.t.Errorf("applying the node's update: %v", err)
				}
			}
		}
		c.mu.Lock()
		c.msgs = append(c.msgs, m)
		c.mu.Unlock()
		signal(c.wake)
	}
}

// decodeServerMessage decodes a message from the node (DecodeMessage plus auth).
func decodeServerMessage(b []byte) (Message, error) {
	if len(b) > 0 && b[0] == TypeAuth {
		d := lib0.NewDecoder(b[1:])
		if d.ReadVarUint() != authPermissionDenied {
			return Message{}, errors.New("unknown auth message")
		}
		reason := d.ReadVarStringBytes()
		return Message{Type: TypeAuth, Payload: reason}, d.Finish()
	}
	return DecodeMessage(b)
}

func (c *client) write(b []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.ws.Write(ctx, websocket.MessageBinary, b)
}

// sync sends the client's SyncStep1 and waits for the node's SyncStep2.
func (c *client) sync() {
	c.t.Helper()
	sv := yjs.EncodeStateVector(c.doc.StateVector())
	n := c.count(func(m Message) bool { return m.Type == TypeSync && m.Sync == SyncStep2 })
	c.write(AppendSync(nil, SyncStep1, sv))
	c.waitFor("SyncStep2", func() bool {
		return c.count(func(m Message) bool { return m.Type == TypeSync && m.Sync == SyncStep2 }) > n
	})
}

// edit makes a local change and sends its update; it returns the update.
func (c *client) edit(fn func(d *yjs.Doc)) []byte {
	c.t.Helper()
	var update []byte
	c.mu.Lock()
	unsub := c.doc.OnUpdate(func(u []byte, origin any) {
		if origin != "remote" {
			update = append([]byte(nil), u...)
		}
	})
	fn(c.doc)
	unsub()
	c.mu.Unlock()
	if update == nil {
		c.t.Fatal("the edit made no update")
	}
	c.write(AppendSync(nil, SyncUpdate, update))
	return update
}

func (c *client) insert(at int, s string) []byte {
	return c.edit(func(d *yjs.Doc) { d.GetText("body").Insert(at, s, nil) })
}

func (c *client) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.doc.GetText("body").String()
}

func (c *client) count(match func(Message) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.msgs {
		if match(m) {
			n++
		}
	}
	return n
}

func (c *client) messages() []Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Message(nil), c.msgs...)
}

func (c *client) closed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// waitFor waits until cond holds (or fails the test after 10 s).
func (c *client) waitFor(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-c.wake:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			c.t.Fatalf("%s: not within 10s (connection: %v)", what, c.closed())
		}
	}
}

// waitClosed waits until the node closed the connection and returns its status.
func (c *client) waitClosed() websocket.StatusCode {
	c.t.Helper()
	c.waitFor("close", func() bool { return c.closed() != nil })
	return websocket.CloseStatus(c.closed())
}

// waitText waits until the client's Y.Text("body") is want.
func (c *client) waitText(want string) {
	c.t.Helper()
	what := want
	if len(what) > 60 {
		what = fmt.Sprintf("%.60q… (%d bytes)", want, len(want))
	}
	c.waitFor("text "+what, func() bool { return c.text() == want })
}

// docText reads Y.Text("body") of the namespace from the registry.
func (e *env) docText() string {
	e.t.Helper()
	l, err := e.reg.Open(context.Background(), "default", e.ns)
	if err != nil {
		e.t.Fatal(err)
	}
	defer l.Release()
	doc, err := l.JSON(context.Background(), registry.Root{Name: "body", Kind: yjs.KindText})
	if err != nil {
		e.t.Fatal(err)
	}
	s, _ := doc["body"].(string)
	return s
}

// status does a plain HTTP upgrade attempt and returns the status and body.
func (e *env) status(ns, token string, header http.Header) (int, string) {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.http.URL+"/v1/yjs/"+ns+"?token="+token, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	return resp.StatusCode, b.String()
}
