package yws

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/lib0"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/yjs"
	"github.com/nomicore/nomicore/yws/hocuspocus"
)

// hframe is a frame the node sent to a Hocuspocus client, decoded by the test (from the
// frame layout @hocuspocus/provider reads; the golden tests of package hocuspocus check the
// node's encoder against @hocuspocus/server's).
type hframe struct {
	ping      bool
	pong      bool
	addr      string
	typ       uint64
	sub       uint64 // sync and auth sub-type
	payload   []byte
	text      string // auth scope or reason, stateless payload, close reason
	syncSaved uint64
}

func decodeNodeFrame(b []byte) (hframe, error) {
	if len(b) == 1 && b[0] == hocuspocus.TypePing {
		return hframe{ping: true}, nil
	}
	if len(b) == 1 && b[0] == hocuspocus.TypePong {
		return hframe{pong: true}, nil
	}
	d := lib0.NewDecoder(b)
	f := hframe{addr: d.ReadVarString(), typ: d.ReadVarUint()}
	switch f.typ {
	case hocuspocus.TypeSync:
		f.sub = d.ReadVarUint()
		f.payload = d.ReadVarUint8Array()
	case hocuspocus.TypeAwareness:
		f.payload = d.ReadVarUint8Array()
	case hocuspocus.TypeAuth:
		f.sub = d.ReadVarUint()
		if f.sub != hocuspocus.AuthToken {
			f.text = d.ReadVarString()
		}
	case hocuspocus.TypeStateless, hocuspocus.TypeClose:
		f.text = d.ReadVarString()
	case hocuspocus.TypeSyncStatus:
		f.syncSaved = d.ReadVarUint()
	default:
		return f, fmt.Errorf("frame type %d", f.typ)
	}
	return f, d.Finish()
}

// hclient is an in-process Hocuspocus client: one socket, a Yjs document per address,
// answering the node's SyncStep1 as a provider does.
type hclient struct {
	t      testing.TB
	ws     *websocket.Conn
	mu     sync.Mutex // guards docs, frames and err
	docs   map[string]*yjs.Doc
	frames []hframe
	err    error
	wake   chan struct{}
	done   chan struct{}
}

func (e *env) hocusURL() string {
	return "ws" + strings.TrimPrefix(e.http.URL, "http") + HocuspocusPath
}

func (e *env) dialHocus() *hclient {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, e.hocusURL(), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	ws.SetReadLimit(64 << 20)
	c := &hclient{t: e.t, ws: ws, docs: map[string]*yjs.Doc{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go c.read()
	e.t.Cleanup(func() { ws.CloseNow(); <-c.done })
	return c
}

func (c *hclient) doc(addr string) *yjs.Doc {
	if c.docs[addr] == nil {
		c.docs[addr] = yjs.NewDoc()
	}
	return c.docs[addr]
}

func (c *hclient) read() {
	defer close(c.done)
	for {
		_, b, err := c.ws.Read(context.Background())
		if err == nil {
			var f hframe
			if f, err = decodeNodeFrame(b); err == nil {
				c.mu.Lock()
				if f.typ == hocuspocus.TypeSync {
					doc := c.doc(f.addr)
					if f.sub == hocuspocus.SyncStep1 {
						diff, _ := yjs.EncodeStateAsUpdate(doc, f.payload)
						c.mu.Unlock()
						c.write(hocuspocus.AppendSync(nil, f.addr, hocuspocus.SyncStep2, diff))
						c.mu.Lock()
					} else if aerr := yjs.ApplyUpdate(doc, f.payload, "remote"); aerr != nil {
						c.t.Errorf("applying the node's update: %v", aerr)
					}
				}
				c.frames = append(c.frames, f)
				c.mu.Unlock()
				signal(c.wake)
				continue
			}
			err = fmt.Errorf("the node sent a bad frame %x: %v", b, err)
		}
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		signal(c.wake)
		return
	}
}

func (c *hclient) write(b []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.ws.Write(ctx, websocket.MessageBinary, b)
}

func authFrame(addr, token string) []byte {
	b := lib0.AppendVarString(nil, addr)
	b = lib0.AppendVarUint(b, hocuspocus.TypeAuth)
	b = lib0.AppendVarUint(b, hocuspocus.AuthToken)
	b = lib0.AppendVarString(b, token)
	return lib0.AppendVarString(b, "4.8.0")
}

// open authenticates addr with token and sends its SyncStep1, as a provider opens a
// document.
func (c *hclient) open(addr, token string) {
	c.mu.Lock()
	sv := yjs.EncodeStateVector(c.doc(addr).StateVector())
	c.mu.Unlock()
	c.write(authFrame(addr, token))
	c.write(hocuspocus.AppendSync(nil, addr, hocuspocus.SyncStep1, sv))
}

// insert edits addr's Y.Text("body") and sends the update; it returns the update.
func (c *hclient) insert(addr string, at int, s string) []byte {
	c.t.Helper()
	var update []byte
	c.mu.Lock()
	doc := c.doc(addr)
	unsub := doc.OnUpdate(func(u []byte, origin any) {
		if origin != "remote" {
			update = append([]byte(nil), u...)
		}
	})
	doc.GetText("body").Insert(at, s, nil)
	unsub()
	c.mu.Unlock()
	c.write(hocuspocus.AppendSync(nil, addr, hocuspocus.SyncUpdate, update))
	return update
}

func (c *hclient) text(addr string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.doc(addr).GetText("body").String()
}

func (c *hclient) count(match func(hframe) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, f := range c.frames {
		if match(f) {
			n++
		}
	}
	return n
}

func (c *hclient) find(match func(hframe) bool) (hframe, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.frames {
		if match(f) {
			return f, true
		}
	}
	return hframe{}, false
}

func (c *hclient) closed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *hclient) waitFor(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-c.wake:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			c.t.Fatalf("%s: not within 10s (socket: %v)", what, c.closed())
		}
	}
}

func (c *hclient) waitFrame(what string, match func(hframe) bool) hframe {
	c.t.Helper()
	var f hframe
	c.waitFor(what, func() bool {
		var ok bool
		f, ok = c.find(match)
		return ok
	})
	return f
}

func (c *hclient) waitClosed() websocket.StatusCode {
	c.t.Helper()
	c.waitFor("socket closed", func() bool { return c.closed() != nil })
	return websocket.CloseStatus(c.closed())
}

func isAuth(addr string, sub uint64) func(hframe) bool {
	return func(f hframe) bool { return f.addr == addr && f.typ == hocuspocus.TypeAuth && f.sub == sub }
}

func isSyncStatus(addr string, saved uint64) func(hframe) bool {
	return func(f hframe) bool {
		return f.addr == addr && f.typ == hocuspocus.TypeSyncStatus && f.syncSaved == saved
	}
}

func isSync(addr string, sub uint64) func(hframe) bool {
	return func(f hframe) bool { return f.addr == addr && f.typ == hocuspocus.TypeSync && f.sub == sub }
}

func isClose(addr string) func(hframe) bool {
	return func(f hframe) bool { return f.addr == addr && f.typ == hocuspocus.TypeClose }
}

// createNamespace makes another namespace on the env's registry.
func (e *env) createNamespace() string {
	e.t.Helper()
	c, err := e.reg.Create(context.Background(), "default")
	if err != nil {
		e.t.Fatal(err)
	}
	return c.NamespaceID
}

func (e *env) docTextOf(ns string) string {
	e.t.Helper()
	saved := e.ns
	e.ns = ns
	defer func() { e.ns = saved }()
	return e.docText()
}

// TestHocuspocus_SyncAndSaved: a document authenticates (Authenticated read-write), gets the
// node's SyncStep1 and SyncStep2, and each update it sends is acknowledged with SyncStatus 1
// — its SyncStep2 answer too — and applied; a y-websocket editor of the namespace sees it.
func TestHocuspocus_SyncAndSaved(t *testing.T) {
	e := newEnv(t, nil)
	yw := e.dial("writer")
	yw.sync()
	yw.insert(0, "from y-websocket ")
	testkit.Eventually(t, 10*time.Second, "the y-websocket editor's change on the node", func() bool { return e.docText() == "from y-websocket " })
	h := e.dialHocus()
	h.open(e.ns, "writer")
	if f := h.waitFrame("Authenticated", isAuth(e.ns, hocuspocus.AuthAuthenticated)); f.text != hocuspocus.ScopeReadWrite {
		t.Fatalf("scope %q", f.text)
	}
	h.waitFrame("the node's SyncStep1", isSync(e.ns, hocuspocus.SyncStep1))
	h.waitFrame("the node's SyncStep2", isSync(e.ns, hocuspocus.SyncStep2))
	h.waitFrame("SyncStatus of the SyncStep2 answer", isSyncStatus(e.ns, 1))
	if got := h.text(e.ns); got != "from y-websocket " {
		t.Fatalf("text %q", got)
	}
	h.insert(e.ns, 0, "hocus ")
	h.waitFor("two SyncStatus", func() bool { return h.count(isSyncStatus(e.ns, 1)) == 2 })
	yw.waitText("hocus from y-websocket ")
	if got := e.docText(); got != "hocus from y-websocket " {
		t.Fatalf("the node's document reads %q", got)
	}
	yw.insert(0, ">")
	h.waitFor("the y-websocket editor's change", func() bool { return h.text(e.ns) == ">hocus from y-websocket " })
	if n := e.srv.Editors(e.ns); n != 2 {
		t.Fatalf("the namespace has %d editors, want 2 (one of each protocol)", n)
	}
}

// TestHocuspocus_ManyDocuments: three documents over one socket; a refused one (unknown
// token, a namespace the token does not grant, not a namespace) is told PermissionDenied,
// and the others go on; the CLOSE of one leaves the others working.
func TestHocuspocus_ManyDocuments(t *testing.T) {
	e := newEnv(t, nil)
	a, b, c := e.ns, e.createNamespace(), e.createNamespace()
	h := e.dialHocus()
	for _, ns := range []string{a, b, c} {
		h.open(ns, "writer")
	}
	h.open("ns-00000000000000000000000000000000", "nope")
	h.open(b+"\x00sess", "other")
	h.open("not-a-namespace", "writer")
	for _, ns := range []string{a, b, c} {
		h.waitFrame("Authenticated "+ns, isAuth(ns, hocuspocus.AuthAuthenticated))
	}
	for addr, want := range map[string]string{"ns-00000000000000000000000000000000": "not known", b + "\x00sess": "does not grant",
		"not-a-namespace": "not a namespace id"} {
		if f := h.waitFrame("PermissionDenied "+addr, isAuth(addr, hocuspocus.AuthPermissionDenied)); !strings.Contains(f.text, want) {
			t.Errorf("%q refused with %q, want it to say %q", addr, f.text, want)
		}
	}
	for i, ns := range []string{a, b, c} {
		h.insert(ns, 0, fmt.Sprintf("doc %d", i))
	}
	for _, ns := range []string{a, b, c} {
		h.waitFor("saved "+ns, func() bool { return h.count(isSyncStatus(ns, 1)) == 2 })
	}
	// The provider closes b: the node forgets it, a and c go on.
	h.write(hocuspocus.AppendAddressed(nil, b, []byte{hocuspocus.TypeClose}))
	waitEditors(t, e, b, 0)
	h.insert(a, 0, "more ")
	h.insert(c, 0, "more ")
	for _, ns := range []string{a, c} {
		h.waitFor("saved again "+ns, func() bool { return h.count(isSyncStatus(ns, 1)) == 3 })
	}
	if got := e.docTextOf(a); got != "more doc 0" {
		t.Fatalf("a reads %q", got)
	}
	if got := e.docTextOf(b); got != "doc 1" {
		t.Fatalf("b reads %q", got)
	}
	if h.closed() != nil {
		t.Fatalf("the socket closed: %v", h.closed())
	}
}

func waitEditors(t *testing.T, e *env, ns string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.srv.Editors(ns) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d editors, want %d", ns, e.srv.Editors(ns), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHocuspocus_ReadOnly: a read-only token is Authenticated "readonly"; its SyncStep2 that
// brings nothing is acknowledged, its change is answered SyncStatus 0 and not applied.
func TestHocuspocus_ReadOnly(t *testing.T) {
	e := newEnv(t, nil)
	h := e.dialHocus()
	h.open(e.ns, "reader")
	if f := h.waitFrame("Authenticated", isAuth(e.ns, hocuspocus.AuthAuthenticated)); f.text != hocuspocus.ScopeReadOnly {
		t.Fatalf("scope %q, want readonly", f.text)
	}
	h.waitFrame("SyncStatus 1 of an empty SyncStep2", isSyncStatus(e.ns, 1))
	h.insert(e.ns, 0, "nope")
	h.waitFrame("SyncStatus 0", isSyncStatus(e.ns, 0))
	if got := e.docText(); got != "" {
		t.Fatalf("a read-only change was applied: %q", got)
	}
	if h.count(isAuth(e.ns, hocuspocus.AuthPermissionDenied)) != 0 {
		t.Fatal("a refused change was told as PermissionDenied (the provider would take it for a failed authentication)")
	}
}

// TestHocuspocus_HeldUntilAuthenticated: frames that come before a document's token are
// held and served once it authenticates; beyond the bounds of what is held, the socket is
// closed with 4205.
func TestHocuspocus_HeldUntilAuthenticated(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Hocuspocus.HeldMessages = 5 })
	h := e.dialHocus()
	doc := yjs.NewDoc()
	var update []byte
	doc.OnUpdate(func(u []byte, _ any) { update = u })
	doc.GetText("body").Insert(0, "early", nil)
	h.write(hocuspocus.AppendSync(nil, e.ns, hocuspocus.SyncUpdate, update))
	h.write(hocuspocus.AppendSync(nil, e.ns, hocuspocus.SyncStep1, []byte{0}))
	time.Sleep(50 * time.Millisecond)
	if got := e.docText(); got != "" {
		t.Fatalf("an update was applied before its document authenticated: %q", got)
	}
	h.write(authFrame(e.ns, "writer"))
	h.waitFrame("SyncStatus of the held update", isSyncStatus(e.ns, 1))
	if got := e.docText(); got != "early" {
		t.Fatalf("the node reads %q", got)
	}
	other := e.createNamespace()
	for range 6 {
		h.write(hocuspocus.AppendSync(nil, other, hocuspocus.SyncStep1, []byte{0}))
	}
	if code := h.waitClosed(); code != 4205 {
		t.Fatalf("closed with %d, want 4205", code)
	}
	if got := e.metric("nomicore_client_limit_closes_total", "limit", "hocuspocus-held-messages"); got != 1 {
		t.Fatalf("limit closes %v", got)
	}
}

// TestHocuspocus_SocketBounds: each bound of a socket by its name — the bytes held for
// documents still authenticating and how many such documents there are close the socket
// with 4205; a document beyond the documents per socket is refused alone (PermissionDenied
// naming the limit) while the socket's others go on; a socket counts once against each user
// of its documents, and a second socket of a user at the per-user limit is refused its
// document. Each is counted in nomicore_client_limit_closes_total by name.
func TestHocuspocus_SocketBounds(t *testing.T) {
	t.Run("held bytes", func(t *testing.T) {
		e := newEnv(t, func(o *Options) { o.Hocuspocus.HeldBytes = 300 })
		h := e.dialHocus()
		h.write(hocuspocus.AppendSync(nil, e.ns, hocuspocus.SyncStep1, []byte{0}))
		h.write(hocuspocus.AppendStateless(nil, e.ns, strings.Repeat("x", 200)))
		if h.closed() != nil {
			t.Fatalf("closed under the bound: %v", h.closed())
		}
		h.write(hocuspocus.AppendStateless(nil, e.ns, strings.Repeat("y", 200)))
		if code := h.waitClosed(); code != 4205 {
			t.Fatalf("closed with %d, want 4205", code)
		}
		if got := e.metric("nomicore_client_limit_closes_total", "limit", "hocuspocus-held-bytes"); got != 1 {
			t.Fatalf("limit closes %v", got)
		}
	})
	t.Run("pending documents", func(t *testing.T) {
		e := newEnv(t, func(o *Options) { o.Hocuspocus.PendingDocuments = 2 })
		h := e.dialHocus()
		h.open(e.ns, "writer") // a document that authenticated is not pending any more
		h.waitFrame("Authenticated", isAuth(e.ns, hocuspocus.AuthAuthenticated))
		for range 2 {
			h.write(hocuspocus.AppendSync(nil, e.createNamespace(), hocuspocus.SyncStep1, []byte{0}))
		}
		if h.count(isClose(e.ns)) != 0 || h.closed() != nil {
			t.Fatalf("closed at the bound: %v", h.closed())
		}
		h.write(hocuspocus.AppendSync(nil, e.createNamespace(), hocuspocus.SyncStep1, []byte{0}))
		if code := h.waitClosed(); code != 4205 {
			t.Fatalf("closed with %d, want 4205", code)
		}
		if got := e.metric("nomicore_client_limit_closes_total", "limit", "hocuspocus-pending-documents"); got != 1 {
			t.Fatalf("limit closes %v", got)
		}
	})
	t.Run("documents per socket", func(t *testing.T) {
		e := newEnv(t, func(o *Options) { o.Hocuspocus.MaxDocuments = 2 })
		a, b, c := e.ns, e.createNamespace(), e.createNamespace()
		h := e.dialHocus()
		h.open(a, "writer")
		h.open(b, "writer")
		h.waitFrame("a", isAuth(a, hocuspocus.AuthAuthenticated))
		h.waitFrame("b", isAuth(b, hocuspocus.AuthAuthenticated))
		h.open(c, "writer")
		if f := h.waitFrame("c refused", isAuth(c, hocuspocus.AuthPermissionDenied)); !strings.Contains(f.text, "hocuspocus-documents-per-socket") {
			t.Fatalf("the refusal says %q", f.text)
		}
		h.insert(b, 0, "b goes on")
		h.waitFor("b saved", func() bool { return h.count(isSyncStatus(b, 1)) >= 2 })
		h.write(hocuspocus.AppendClose(nil, a, ""))
		h.write(authFrame(c, "writer")) // a place is free again: c's next token opens it
		h.waitFrame("c authenticated", isAuth(c, hocuspocus.AuthAuthenticated))
		if got := e.metric("nomicore_client_limit_closes_total", "limit", "hocuspocus-documents-per-socket"); got != 1 {
			t.Fatalf("limit closes %v", got)
		}
	})
	t.Run("connections per user", func(t *testing.T) {
		e := newEnv(t, func(o *Options) { o.Limits.ConnectionsPerUser = 1 })
		a, b := e.ns, e.createNamespace()
		h := e.dialHocus()
		h.open(a, "writer")
		h.open(b, "writer") // the same user on the same socket: one connection
		h.waitFrame("a", isAuth(a, hocuspocus.AuthAuthenticated))
		h.waitFrame("b", isAuth(b, hocuspocus.AuthAuthenticated))
		h2 := e.dialHocus()
		h2.open(a, "writer")
		if f := h2.waitFrame("refused", isAuth(a, hocuspocus.AuthPermissionDenied)); !strings.Contains(f.text, "per user") {
			t.Fatalf("the refusal says %q", f.text)
		}
		h2.open(b, "reader") // another user
		h2.waitFrame("the reader", isAuth(b, hocuspocus.AuthAuthenticated))
		if got := e.metric("nomicore_client_limit_closes_total", "limit", "connections-per-user"); got != 1 {
			t.Fatalf("limit closes %v", got)
		}
	})
}

// TestHocuspocus_BadInputClosesTheDocument: a frame of one document that does not decode
// closes that document (CLOSE "Reset Connection"); one whose address does not decode closes
// the socket (1007).
func TestHocuspocus_BadInputClosesTheDocument(t *testing.T) {
	e := newEnv(t, nil)
	a, b := e.ns, e.createNamespace()
	h := e.dialHocus()
	h.open(a, "writer")
	h.open(b, "writer")
	h.waitFrame("b authenticated", isAuth(b, hocuspocus.AuthAuthenticated))
	h.write(hocuspocus.AppendSync(nil, a, hocuspocus.SyncUpdate, []byte{1, 2, 3}))
	if f := h.waitFrame("CLOSE a", isClose(a)); f.text != "Reset Connection" {
		t.Fatalf("CLOSE reason %q", f.text)
	}
	h.insert(b, 0, "still here")
	h.waitFor("b saved", func() bool { return h.count(isSyncStatus(b, 1)) == 2 })
	h.write([]byte{0x85})
	if code := h.waitClosed(); code != websocket.StatusInvalidFramePayloadData {
		t.Fatalf("closed with %d, want 1007", code)
	}
}

// TestHocuspocus_TokenRefreshAndRevocation: the provider sends a token again on the same
// socket: a valid one replaces the grant (Authenticated with its scope), a bad one is told
// PermissionDenied and closes the document ("Unauthorized"); a token removed from the node
// closes its documents ("Unauthorized").
func TestHocuspocus_TokenRefreshAndRevocation(t *testing.T) {
	e := newEnv(t, nil)
	a, b := e.ns, e.createNamespace()
	h := e.dialHocus()
	h.open(a, "reader")
	h.open(b, "writer")
	h.waitFrame("a authenticated", isAuth(a, hocuspocus.AuthAuthenticated))
	h.waitFrame("b authenticated", isAuth(b, hocuspocus.AuthAuthenticated))
	h.write(authFrame(a, "writer"))
	h.waitFor("a read-write", func() bool {
		n := 0
		h.count(func(f hframe) bool {
			if isAuth(a, hocuspocus.AuthAuthenticated)(f) && f.text == hocuspocus.ScopeReadWrite {
				n++
			}
			return false
		})
		return n == 1
	})
	h.insert(a, 0, "now writable")
	h.waitFor("a saved", func() bool { return h.count(isSyncStatus(a, 1)) == 2 })
	h.write(authFrame(a, "not-a-token"))
	h.waitFrame("PermissionDenied a", isAuth(a, hocuspocus.AuthPermissionDenied))
	if f := h.waitFrame("CLOSE a", isClose(a)); f.text != "Unauthorized" {
		t.Fatalf("CLOSE reason %q", f.text)
	}
	e.tokens.remove("writer")
	e.srv.Revalidate()
	if f := h.waitFrame("CLOSE b", isClose(b)); f.text != "Unauthorized" {
		t.Fatalf("CLOSE reason %q", f.text)
	}
	if h.closed() != nil {
		t.Fatalf("the socket closed: %v", h.closed())
	}
}

// TestHocuspocus_AwarenessAndStatelessAcrossProtocols: awareness and stateless messages
// reach the editors of both protocols in the namespace's room.
func TestHocuspocus_AwarenessAndStatelessAcrossProtocols(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, e.url(e.ns, "writer")+"&stateless=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	yw := &client{t: t, ws: ws, doc: yjs.NewDoc(), wake: make(chan struct{}, 1), done: make(chan struct{})}
	go yw.read()
	t.Cleanup(func() { ws.CloseNow(); <-yw.done })
	yw.sync()
	h := e.dialHocus()
	h.open(e.ns, "writer")
	h.waitFrame("authenticated", isAuth(e.ns, hocuspocus.AuthAuthenticated))
	h.waitFrame("SyncStatus", isSyncStatus(e.ns, 1))

	h.write(hocuspocus.AppendAwareness(nil, e.ns, AppendAwarenessUpdate(nil, []AwarenessEntry{{ClientID: 77, Clock: 1, State: []byte(`{"user":"h"}`)}})))
	yw.waitFor("the Hocuspocus client's awareness", func() bool {
		return yw.count(func(m Message) bool {
			return m.Type == TypeAwareness && strings.Contains(string(m.Payload), `"user":"h"`)
		}) > 0
	})
	yw.write(AppendAwareness(nil, AppendAwarenessUpdate(nil, []AwarenessEntry{{ClientID: 78, Clock: 1, State: []byte(`{"user":"y"}`)}})))
	h.waitFrame("the y-websocket client's awareness", func(f hframe) bool {
		return f.addr == e.ns && f.typ == hocuspocus.TypeAwareness && strings.Contains(string(f.payload), `"user":"y"`)
	})

	h.write(hocuspocus.AppendStateless(nil, e.ns, `{"ping":1}`))
	yw.waitFor("the stateless message", func() bool {
		return yw.count(func(m Message) bool { return m.Type == TypeStateless && m.Stateless == `{"ping":1}` }) > 0
	})
	yw.write(AppendStateless(nil, `{"pong":2}`))
	h.waitFrame("the stateless answer", func(f hframe) bool {
		return f.addr == e.ns && f.typ == hocuspocus.TypeStateless && f.text == `{"pong":2}`
	})
	if n := e.srv.BroadcastStateless(e.ns, `{"from":"admin"}`); n != 2 {
		t.Fatalf("the node's stateless message reached %d editors, want 2", n)
	}
	h.waitFrame("the node's stateless message", func(f hframe) bool { return f.typ == hocuspocus.TypeStateless && f.text == `{"from":"admin"}` })
	yw.waitFor("the node's stateless message", func() bool {
		return yw.count(func(m Message) bool { return m.Type == TypeStateless && m.Stateless == `{"from":"admin"}` }) > 0
	})
}

// TestHocuspocus_KeepAliveAndTimeout: a 4.x provider (it announced its version) hears
// Pings on a quiet socket and the node answers its Ping; a socket that authenticates
// nothing is closed with 4408.
func TestHocuspocus_KeepAliveAndTimeout(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.KeepAlive = 50 * time.Millisecond
		o.Hocuspocus.Timeout = 300 * time.Millisecond
	})
	h := e.dialHocus()
	h.open(e.ns, "writer")
	h.waitFrame("a Ping", func(f hframe) bool { return f.ping })
	h.write(hocuspocus.Ping)
	h.waitFrame("the node's Pong", func(f hframe) bool { return f.pong })
	idle := e.dialHocus()
	if code := idle.waitClosed(); code != 4408 {
		t.Fatalf("an unauthenticated socket closed with %d, want 4408", code)
	}
}

// TestHocuspocus_SavedOnlyWhenDurable: over a bbolt store whose commits are held, the node
// applies a Hocuspocus client's update and relays nothing, and sends no SyncStatus, until
// the commit is let through.
func TestHocuspocus_SavedOnlyWhenDurable(t *testing.T) {
	var mu sync.Mutex      // guards gate
	var gate chan struct{} // while set, commits wait until it is closed
	held := struct{ Lock, Unlock func() }{
		Lock: func() { mu.Lock(); gate = make(chan struct{}); mu.Unlock() },
		Unlock: func() {
			mu.Lock()
			if gate != nil {
				close(gate)
				gate = nil
			}
			mu.Unlock()
		},
	}
	st, err := persistence.OpenDataDir(t.TempDir(), persistence.Options{Compactor: registry.Compactor(),
		CommitHook: func() error {
			mu.Lock()
			g := gate
			mu.Unlock()
			if g != nil {
				<-g
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, st, nil)
	h := e.dialHocus()
	h.open(e.ns, "writer")
	h.waitFrame("SyncStatus of the SyncStep2", isSyncStatus(e.ns, 1))
	yw := e.dial("writer")
	yw.sync()

	held.Lock()
	u := h.insert(e.ns, 0, "durable?")
	time.Sleep(300 * time.Millisecond)
	if n := h.count(isSyncStatus(e.ns, 1)); n != 1 {
		held.Unlock()
		t.Fatalf("%d SyncStatus while the store holds the commit, want 1 (only the SyncStep2's)", n)
	}
	if got := yw.text(); got != "" {
		held.Unlock()
		t.Fatalf("relayed before it was durable: %q", got)
	}
	// A second socket whose SyncStep2 brings the same change — nothing new to the node,
	// which applied it — is not told it is saved either: it is not durable yet.
	h2 := e.dialHocus()
	h2.mu.Lock()
	if err := yjs.ApplyUpdate(h2.doc(e.ns), u, nil); err != nil {
		h2.mu.Unlock()
		held.Unlock()
		t.Fatal(err)
	}
	h2.mu.Unlock()
	h2.open(e.ns, "writer")
	h2.waitFrame("the node's SyncStep2", isSync(e.ns, hocuspocus.SyncStep2))
	time.Sleep(200 * time.Millisecond)
	if n := h2.count(isSyncStatus(e.ns, 1)); n != 0 {
		held.Unlock()
		t.Fatalf("the second socket was told its change is saved while the store holds the commit")
	}
	held.Unlock()
	h.waitFor("SyncStatus once durable", func() bool { return h.count(isSyncStatus(e.ns, 1)) == 2 })
	h2.waitFor("the second socket's SyncStatus once durable", func() bool { return h2.count(isSyncStatus(e.ns, 1)) == 1 })
	yw.waitText("durable?")
}

// TestHocuspocus_BroadcastStatelessWithoutEditors: a stateless message to a namespace with
// no editor on the node reaches no one (and opens nothing).
func TestHocuspocus_BroadcastStatelessWithoutEditors(t *testing.T) {
	e := newEnv(t, nil)
	if n := e.srv.BroadcastStateless(e.ns, "x"); n != 0 {
		t.Fatalf("reached %d", n)
	}
}

// TestHocuspocus_RetryAfterRefusal: a document refused (PermissionDenied) keeps what it
// sent — its SyncStep1, a change typed meanwhile — and a token sent again serves it all:
// the provider syncs and its change is saved.
func TestHocuspocus_RetryAfterRefusal(t *testing.T) {
	e := newEnv(t, nil)
	h := e.dialHocus()
	h.open(e.ns, "not-a-token")
	h.waitFrame("PermissionDenied", isAuth(e.ns, hocuspocus.AuthPermissionDenied))
	h.insert(e.ns, 0, "typed meanwhile")
	time.Sleep(50 * time.Millisecond)
	if got := e.docText(); got != "" {
		t.Fatalf("a refused document's change was applied: %q", got)
	}
	h.write(authFrame(e.ns, "writer"))
	h.waitFrame("Authenticated", isAuth(e.ns, hocuspocus.AuthAuthenticated))
	h.waitFrame("the node's SyncStep2", isSync(e.ns, hocuspocus.SyncStep2))
	h.waitFor("its SyncStep2 and its change saved", func() bool { return h.count(isSyncStatus(e.ns, 1)) == 2 })
	if got := e.docText(); got != "typed meanwhile" {
		t.Fatalf("the node reads %q", got)
	}
}

// TestHocuspocus_KeepAliveOfA3xProvider: a provider that announced no version (3.x cannot
// read a Ping) hears an empty awareness update of its document on a quiet socket.
func TestHocuspocus_KeepAliveOfA3xProvider(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.KeepAlive = 50 * time.Millisecond })
	h := e.dialHocus()
	auth3 := lib0.AppendVarString(nil, e.ns)
	auth3 = append(auth3, hocuspocus.TypeAuth, hocuspocus.AuthToken)
	auth3 = lib0.AppendVarString(auth3, "writer")
	h.write(auth3)
	h.waitFrame("Authenticated", isAuth(e.ns, hocuspocus.AuthAuthenticated))
	h.waitFrame("an empty awareness update", func(f hframe) bool {
		return f.addr == e.ns && f.typ == hocuspocus.TypeAwareness && len(f.payload) == 1 && f.payload[0] == 0
	})
	if _, ok := h.find(func(f hframe) bool { return f.ping }); ok {
		t.Fatal("a provider that cannot read a Ping was sent one")
	}
}

// TestHocuspocus_NarrowedGrantAndLimits: a token that no longer grants the namespace closes
// its document ("Forbidden"); a socket over the editors' message rate is closed with 1008.
func TestHocuspocus_NarrowedGrantAndLimits(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Limits.MessagesPerSecond = 20 })
	e.tokens.set("narrow", auth.ClientGrant{Name: "narrow", Namespaces: []string{"*"}})
	h := e.dialHocus()
	h.open(e.ns, "narrow")
	h.waitFrame("Authenticated", isAuth(e.ns, hocuspocus.AuthAuthenticated))
	e.tokens.set("narrow", auth.ClientGrant{Name: "narrow", Namespaces: []string{"ns-00000000000000000000000000000000"}})
	e.srv.Revalidate()
	if f := h.waitFrame("CLOSE", isClose(e.ns)); f.text != "Forbidden" {
		t.Fatalf("CLOSE reason %q", f.text)
	}
	for range 200 {
		h.write(hocuspocus.Ping)
	}
	if code := h.waitClosed(); code != websocket.StatusPolicyViolation {
		t.Fatalf("closed with %d, want 1008", code)
	}
	if got := e.metric("nomicore_client_limit_closes_total", "limit", "messages-per-second"); got != 1 {
		t.Fatalf("limit closes %v", got)
	}
}

// TestHocuspocus_DeletedNamespace: a namespace deleted while a document of it is open closes
// that document alone (CLOSE "Namespace Deleted"; the socket's other document goes on), and
// a document of it opened later is refused, the reason saying it was deleted.
func TestHocuspocus_DeletedNamespace(t *testing.T) {
	e := newEnv(t, nil)
	gone, kept := e.ns, e.createNamespace()
	h := e.dialHocus()
	h.open(gone, "writer")
	h.open(kept, "writer")
	h.waitFrame("gone", isAuth(gone, hocuspocus.AuthAuthenticated))
	h.waitFrame("kept", isAuth(kept, hocuspocus.AuthAuthenticated))
	if err := e.reg.Delete(context.Background(), "default", gone, 1); err != nil {
		t.Fatal(err)
	}
	if f := h.waitFrame("CLOSE of the deleted one", isClose(gone)); f.text != "Namespace Deleted" {
		t.Fatalf("CLOSE reason %q", f.text)
	}
	h.insert(kept, 0, "goes on")
	h.waitFor("kept saved", func() bool { return h.count(isSyncStatus(kept, 1)) >= 2 })
	h2 := e.dialHocus()
	h2.open(gone, "writer")
	if f := h2.waitFrame("refused", isAuth(gone, hocuspocus.AuthPermissionDenied)); !strings.Contains(f.text, "deleted") {
		t.Fatalf("the refusal says %q", f.text)
	}
	if h.closed() != nil {
		t.Fatalf("the socket closed: %v", h.closed())
	}
}
