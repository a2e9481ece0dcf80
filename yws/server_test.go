package yws

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/lib0"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/yjs"
)

// On connect the node sends its SyncStep1; it answers SyncStep1 with the diff; an
// editor's update is written to the namespace (through the sequencer) and relayed to the
// other editors, not back to its sender.
func TestSync_HandshakeWriteAndRelay(t *testing.T) {
	e := newEnv(t, nil)
	a := e.dial("writer")
	a.waitFor("the node's SyncStep1", func() bool {
		return a.count(func(m Message) bool { return m.Type == TypeSync && m.Sync == SyncStep1 }) == 1
	})
	a.sync()
	a.insert(0, "hello")
	b := e.dial("writer")
	b.sync()
	b.waitText("hello")
	if got := e.docText(); got != "hello" {
		t.Fatalf("the namespace holds %q", got)
	}
	before := len(b.messages())
	own := b.insert(5, " world")
	a.waitText("hello world")
	a.insert(0, ">")
	b.waitText(">hello world")
	// b's own update never came back to it: no update the node sent b after b's edit
	// carries b's structs (a's earlier "hello" may still arrive as a relayed update too,
	// if b joined before that relay pass; Yjs ignores it).
	bRanges, _, err := yjs.UpdateRanges(own)
	if err != nil || len(bRanges) != 1 {
		t.Fatalf("b's update: ranges %v, %v", bRanges, err)
	}
	fromA := 0
	for _, m := range b.messages()[before:] {
		if m.Type != TypeSync || m.Sync != SyncUpdate {
			continue
		}
		from, _, err := yjs.UpdateRanges(m.Payload)
		if err != nil {
			t.Fatal(err)
		}
		for c := range bRanges {
			if _, echoed := from[c]; echoed {
				t.Fatal("b's own update came back to it")
			}
		}
		fromA++
	}
	if fromA == 0 {
		t.Fatal("b got no update after its edit, yet it shows a's")
	}
	if e.metric("nomicore_client_connections") != 2 {
		t.Fatalf("connections gauge %v", e.metric("nomicore_client_connections"))
	}
	if e.metric("nomicore_client_messages_received_total", "type", "update") != 3 {
		t.Fatalf("updates received %v", e.metric("nomicore_client_messages_received_total", "type", "update"))
	}
}

// Updates that reach the namespace from elsewhere (here a local admin-style write) are
// relayed to every editor.
func TestSync_RelaysWritesFromElsewhere(t *testing.T) {
	e := newEnv(t, nil)
	a := e.dial("writer")
	a.sync()
	other := yjs.NewDoc()
	var u []byte
	other.OnUpdate(func(b []byte, _ any) { u = b })
	other.GetText("body").Insert(0, "from the admin API", nil)
	l, err := e.reg.Open(context.Background(), "default", e.ns)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if _, err := l.WriteLocal(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	a.waitText("from the admin API")
}

// A SyncStep2 from the editor (what it has that the node lacks) is written and relayed as
// an update.
func TestSync_EditorsSyncStep2IsWritten(t *testing.T) {
	e := newEnv(t, nil)
	a := e.dial("writer")
	b := e.dial("writer")
	b.sync()
	// a edits offline (before answering the node's SyncStep1)...
	a.mu.Lock()
	a.doc.GetText("body").Insert(0, "offline", nil)
	a.mu.Unlock()
	// ... then answers it: its SyncStep2 carries the edit.
	var sv []byte
	for _, m := range a.messages() {
		if m.Type == TypeSync && m.Sync == SyncStep1 {
			sv = m.Payload
		}
	}
	if sv == nil {
		a.waitFor("SyncStep1", func() bool { return a.count(func(m Message) bool { return m.Sync == SyncStep1 }) > 0 })
		sv = a.messages()[0].Payload
	}
	a.mu.Lock()
	diff, _ := yjs.EncodeStateAsUpdate(a.doc, sv)
	a.mu.Unlock()
	a.write(AppendSync(nil, SyncStep2, diff))
	b.waitText("offline")
	if got := e.docText(); got != "offline" {
		t.Fatalf("the namespace holds %q", got)
	}
}

// Awareness: relayed among the editors, sent to a newcomer, answered to queryAwareness,
// and removed (null with clock + 1) when its connection closes.
func TestAwareness_RelayGreetQueryAndRemoveOnClose(t *testing.T) {
	e := newEnv(t, nil)
	a := e.dial("writer")
	b := e.dial("writer")
	a.sync()
	b.sync()
	state := `{"user":{"name":"ada"}}`
	a.write(AppendAwareness(nil, AppendAwarenessUpdate(nil, []AwarenessEntry{{ClientID: 11, Clock: 3, State: []byte(state)}})))
	b.waitFor("a's awareness", func() bool { return hasAwareness(b, 11, 3, state) })
	if hasAwareness(a, 11, 3, state) {
		t.Fatal("the sender got its own awareness back")
	}
	if e.metric("nomicore_client_awareness_states") != 1 {
		t.Fatalf("awareness gauge %v", e.metric("nomicore_client_awareness_states"))
	}
	// A stale clock is not relayed.
	a.write(AppendAwareness(nil, AppendAwarenessUpdate(nil, []AwarenessEntry{{ClientID: 11, Clock: 2, State: []byte(`{"old":1}`)}})))
	// A newcomer is greeted with the states; queryAwareness gets them again.
	c := e.dial("writer")
	c.waitFor("greeting", func() bool { return hasAwareness(c, 11, 3, state) })
	n := c.count(func(m Message) bool { return m.Type == TypeAwareness })
	c.write([]byte{TypeQueryAwareness})
	c.waitFor("queryAwareness answer", func() bool { return c.count(func(m Message) bool { return m.Type == TypeAwareness }) > n })
	if hasAwareness(b, 11, 2, `{"old":1}`) {
		t.Fatal("a stale awareness entry was relayed")
	}
	a.ws.Close(websocket.StatusNormalClosure, "")
	b.waitFor("removal", func() bool { return hasAwareness(b, 11, 4, "null") })
	c.waitFor("removal", func() bool { return hasAwareness(c, 11, 4, "null") })
	waitMetric(t, e, "nomicore_client_awareness_states", 0)
}

// Awareness changes that come faster than awarenessRelayInterval go out together, each
// client's latest only; one that comes after a quiet interval goes out at once.
func TestAwareness_RelayCoalesced(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	e := newEnv(t, func(o *Options) { o.Clock = clk })
	a := e.dial("writer")
	b := e.dial("writer")
	a.sync()
	b.sync()
	set := func(c *client, id, clk uint64, state string) {
		c.write(AppendAwareness(nil, AppendAwarenessUpdate(nil, []AwarenessEntry{{ClientID: id, Clock: clk, State: []byte(state)}})))
	}
	awareness := func(c *client) int {
		return c.count(func(m Message) bool { return m.Type == TypeAwareness && len(m.Payload) > 1 })
	}
	set(a, 1, 1, `{"n":1}`)
	b.waitFor("the first change, at once", func() bool { return hasAwareness(b, 1, 1, `{"n":1}`) })
	for i := 2; i <= 50; i++ {
		set(a, 1, uint64(i), `{"n":1}`)
	}
	set(b, 2, 1, `{"m":1}`)
	waitMetric(t, e, "nomicore_client_messages_received_total", 51, "type", "awareness")
	time.Sleep(20 * time.Millisecond)
	if hasAwareness(b, 1, 50, `{"n":1}`) {
		t.Fatal("a change within the interval went out at once")
	}
	clk.Advance(awarenessRelayInterval)
	b.waitFor("the latest change", func() bool { return hasAwareness(b, 1, 50, `{"n":1}`) })
	a.waitFor("b's change", func() bool { return hasAwareness(a, 2, 1, `{"m":1}`) })
	if n := awareness(b); n != 2 {
		t.Fatalf("b heard %d awareness messages for 50 changes of a, want 2", n)
	}
	for i := 2; i < 50; i++ {
		if hasAwareness(b, 1, uint64(i), `{"n":1}`) {
			t.Fatalf("an overtaken change (clock %d) was relayed", i)
		}
	}
}

func hasAwareness(c *client, id, clk uint64, state string) bool {
	for _, m := range c.messages() {
		if m.Type != TypeAwareness {
			continue
		}
		entries, err := DecodeAwareness(m.Payload, 1000, 1<<20)
		if err != nil {
			c.t.Errorf("the node sent a bad awareness update: %v", err)
			return false
		}
		for _, en := range entries {
			if en.ClientID == id && en.Clock == clk && string(en.State) == state {
				return true
			}
		}
	}
	return false
}

func waitMetric(t *testing.T, e *env, name string, want float64, labels ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.metric(name, labels...) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s %v = %v, want %v", name, labels, e.metric(name, labels...), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Awareness states not renewed within the timeout are removed; a silent connection hears
// the keep-alive.
func TestAwareness_TimeoutAndKeepAlive(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	e := newEnv(t, func(o *Options) { o.Clock = clk })
	a := e.dial("writer")
	b := e.dial("writer")
	a.sync()
	b.sync()
	a.write(AppendAwareness(nil, AppendAwarenessUpdate(nil, []AwarenessEntry{{ClientID: 5, Clock: 1, State: []byte(`{}`)}})))
	b.waitFor("state", func() bool { return hasAwareness(b, 5, 1, "{}") })
	keepAlives := func(c *client) int {
		return c.count(func(m Message) bool { return m.Type == TypeAwareness && bytes.Equal(m.Payload, []byte{0}) })
	}
	for range 12 { // 12 × 3 s > 30 s, ticking past every keep-alive and the timeout
		clk.Advance(3 * time.Second)
		time.Sleep(5 * time.Millisecond)
	}
	b.waitFor("timeout removal", func() bool { return hasAwareness(b, 5, 2, "null") })
	a.waitFor("keep-alive", func() bool { return keepAlives(a) > 0 })
	if e.metric("nomicore_client_awareness_states") != 0 {
		t.Fatal("the expired state is still counted")
	}
}

// Bounds: states per namespace and per connection; an entry beyond either is dropped and
// counted, and the connection stays open.
func TestAwareness_Bounds(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxAwarenessStates = 3; o.Limits.AwarenessStatesPerConnection = 2 })
	a := e.dial("writer")
	b := e.dial("writer")
	a.sync()
	b.sync()
	a.write(AppendAwareness(nil, AppendAwarenessUpdate(nil, []AwarenessEntry{
		{ClientID: 1, Clock: 1, State: []byte(`{"a":1}`)},
		{ClientID: 2, Clock: 1, State: []byte(`{"b":1}`)},
		{ClientID: 3, Clock: 1, State: []byte(`{"c":1}`)}, // over a's two states
	})))
	b.waitFor("a's states", func() bool { return hasAwareness(b, 2, 1, `{"b":1}`) })
	b.write(AppendAwareness(nil, AppendAwarenessUpdate(nil, []AwarenessEntry{
		{ClientID: 4, Clock: 1, State: []byte(`{"d":1}`)},
		{ClientID: 5, Clock: 1, State: []byte(`{"e":1}`)}, // over the namespace's three states
	})))
	a.waitFor("b's state", func() bool { return hasAwareness(a, 4, 1, `{"d":1}`) })
	waitMetric(t, e, "nomicore_client_awareness_dropped_total", 2)
	// A removal frees a place of its connection and of the namespace.
	a.write(AppendAwareness(nil, AppendAwarenessUpdate(nil, []AwarenessEntry{
		{ClientID: 1, Clock: 2, State: []byte(`null`)},
		{ClientID: 3, Clock: 2, State: []byte(`{"c":2}`)},
	})))
	b.waitFor("a's third client", func() bool { return hasAwareness(b, 3, 2, `{"c":2}`) })
	if hasAwareness(b, 3, 1, `{"c":1}`) || hasAwareness(a, 5, 1, `{"e":1}`) {
		t.Fatal("an entry beyond the bounds was relayed")
	}
	if a.closed() != nil || b.closed() != nil {
		t.Fatalf("a bound closed a connection: %v, %v", a.closed(), b.closed())
	}
	waitMetric(t, e, "nomicore_client_awareness_states", 3)
}

// A read-only editor syncs and receives, its changes are not applied: PermissionDenied
// once, the socket stays open; a SyncStep2 that brings nothing new is no change.
func TestReadOnly_ChangesRefusedSocketStaysOpen(t *testing.T) {
	e := newEnv(t, nil)
	w := e.dial("writer")
	w.sync()
	w.insert(0, "shared")
	r := e.dial("reader")
	r.sync()
	r.waitText("shared")
	// Its answer to the node's SyncStep1 (nothing new) was taken silently.
	r.waitFor("answered SyncStep1", func() bool { return e.metric("nomicore_client_messages_received_total", "type", "sync-step2") >= 1 })
	r.insert(0, "x")
	r.insert(0, "y")
	r.waitFor("PermissionDenied", func() bool { return r.count(func(m Message) bool { return m.Type == TypeAuth }) == 1 })
	waitMetric(t, e, "nomicore_client_refused_updates_total", 2, "reason", "read-only")
	if got := e.docText(); got != "shared" {
		t.Fatalf("a read-only change was applied: %q", got)
	}
	w.insert(6, "!")
	r.waitText("yxshared!") // still open, still receiving (its own refused edits stay local)
	if n := r.count(func(m Message) bool { return m.Type == TypeAuth }); n != 1 {
		t.Fatalf("%d PermissionDenied, want 1", n)
	}
	if w.text() != "shared!" {
		t.Fatalf("the writer sees %q", w.text())
	}
}

// An update that touches meta is refused with zero effect (PermissionDenied, counted);
// later updates that build on it are dropped, not left pending in the document; other
// editors' work goes on.
func TestMeta_RefusedAndTheGapIsNotPending(t *testing.T) {
	e := newEnv(t, nil)
	a := e.dial("writer")
	a.sync()
	a.insert(0, "ok")
	a.edit(func(d *yjs.Doc) { d.GetMap("meta").Set("replicationEpoch", 99.0) })
	a.waitFor("PermissionDenied", func() bool { return a.count(func(m Message) bool { return m.Type == TypeAuth }) == 1 })
	a.insert(2, " after") // builds on the refused update's clock
	waitMetric(t, e, "nomicore_client_refused_updates_total", 1, "reason", "protected-meta")
	waitMetric(t, e, "nomicore_client_refused_updates_total", 1, "reason", "after-refused")
	l, err := e.reg.Open(context.Background(), "default", e.ns)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if l.Identity().Epoch != 1 {
		t.Fatalf("meta changed: epoch %d", l.Identity().Epoch)
	}
	st, err := l.EncodeState(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	d := yjs.NewDoc()
	if err := yjs.ApplyUpdate(d, st, nil); err != nil {
		t.Fatal(err)
	}
	if d.HasPending() || d.GetText("body").String() != "ok" {
		t.Fatalf("document: text %q, pending %v", d.GetText("body").String(), d.HasPending())
	}
	// Another editor is unaffected.
	b := e.dial("writer")
	b.sync()
	b.insert(2, "!")
	a.waitFor("b's edit", func() bool { return strings.Contains(a.text(), "!") })
	if got := e.docText(); got != "ok!" {
		t.Fatalf("namespace text %q", got)
	}
}

// Refusals before the upgrade, each with a JSON body.
func TestAdmission_RefusedBeforeUpgrade(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxClients = 1 })
	for _, tc := range []struct {
		name, ns, token string
		header          http.Header
		status          int
		code            string
	}{
		{"missing token", e.ns, "", nil, 401, "UNAUTHORIZED"},
		{"unknown token", e.ns, "nope", nil, 401, "UNAUTHORIZED"},
		{"bad bearer", e.ns, "", http.Header{"Authorization": {"Bearer nope"}}, 401, "UNAUTHORIZED"},
		{"not granted", e.ns, "other", nil, 403, "FORBIDDEN"},
		{"unknown namespace", "ns-0123456789abcdef0123456789abcdef", "writer", nil, 404, "NAMESPACE_NOT_FOUND"},
		{"not a namespace id", "notes", "writer", nil, 404, "NAMESPACE_NOT_FOUND"},
	} {
		status, body := e.status(tc.ns, tc.token, tc.header)
		if status != tc.status || !strings.Contains(body, `"code":"`+tc.code+`"`) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, status, body, tc.status, tc.code)
		}
	}
	// The bearer header works like ?token=.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, e.url(e.ns, ""), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer writer"}}})
	if err != nil {
		t.Fatalf("bearer: %v", err)
	}
	// --max-clients: the second connection is refused with 503.
	if status, body := e.status(e.ns, "writer", nil); status != 503 || !strings.Contains(body, "TOO_MANY_CLIENTS") {
		t.Errorf("over max clients: %d %s", status, body)
	}
	ws.Close(websocket.StatusNormalClosure, "")
	if got := e.metric("nomicore_client_rejections_total", "reason", "unknown-token"); got != 2 {
		t.Errorf("unknown-token rejections %v", got)
	}
}

// failingClients is an authenticator that cannot answer (its service is down).
type failingClients struct{}

func (failingClients) AuthenticateClient(context.Context, auth.ClientCredential) (auth.ClientGrant, error) {
	return auth.ClientGrant{}, errors.New("the credential service does not answer")
}

func (failingClients) RecheckClient(auth.ClientGrant) (auth.ClientGrant, error) {
	return auth.ClientGrant{}, errors.New("the credential service does not answer")
}

// A credential that cannot be checked now (not an unknown one) is refused before the
// upgrade with 503, counted apart, and the editor page grants nothing.
func TestAdmission_CredentialCannotBeChecked(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Clients = failingClients{} })
	status, body := e.status(e.ns, "writer", nil)
	if status != 503 || !strings.Contains(body, `"code":"UNAVAILABLE"`) {
		t.Fatalf("got %d %s, want 503 UNAVAILABLE", status, body)
	}
	if got := e.metric("nomicore_client_rejections_total", "reason", "auth-unavailable"); got != 1 {
		t.Errorf("auth-unavailable rejections %v", got)
	}
	if got := e.srv.pageAccess(context.Background(), auth.ClientCredential{Token: "writer", NamespaceID: e.ns}); got != "" {
		t.Errorf("page access %q, want none", got)
	}
}

// A removed token closes its sockets (4401); a narrowed grant closes with 4403; a grant
// turned read-only applies at once.
func TestRevalidate_RemovedAndNarrowedTokens(t *testing.T) {
	e := newEnv(t, nil)
	e.tokens.set("t1", auth.ClientGrant{Name: "one", Namespaces: []string{"*"}})
	e.tokens.set("t2", auth.ClientGrant{Name: "two", Namespaces: []string{"*"}})
	e.tokens.set("t3", auth.ClientGrant{Name: "three", Namespaces: []string{"*"}})
	c1, c2, c3 := e.dial("t1"), e.dial("t2"), e.dial("t3")
	c3.sync()
	e.tokens.remove("t1")
	e.tokens.set("t2", auth.ClientGrant{Name: "two", Namespaces: []string{"ns-00000000000000000000000000000001"}})
	e.tokens.set("t3", auth.ClientGrant{Name: "three", Namespaces: []string{"*"}, ReadOnly: true})
	e.srv.Revalidate()
	if code := c1.waitClosed(); code != 4401 {
		t.Errorf("removed token: close %d, want 4401", code)
	}
	if code := c2.waitClosed(); code != 4403 {
		t.Errorf("narrowed grant: close %d, want 4403", code)
	}
	c3.insert(0, "x")
	c3.waitFor("PermissionDenied", func() bool { return c3.count(func(m Message) bool { return m.Type == TypeAuth }) == 1 })
}

// Bad input closes the socket with the status that says why: 1003 unsupported, 1007
// malformed, 1009 too large — never a panic.
func TestBadInput_Closes(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxMessageBytes = 1024 })
	for _, tc := range []struct {
		name string
		msg  []byte
		text bool
		want websocket.StatusCode
	}{
		{"unknown type", []byte{9}, false, websocket.StatusUnsupportedData},
		{"auth from a client", AppendPermissionDenied(nil, "x"), false, websocket.StatusUnsupportedData},
		{"unknown sync type", []byte{0, 7, 0}, false, websocket.StatusUnsupportedData},
		{"text message", nil, true, websocket.StatusUnsupportedData},
		{"truncated", []byte{0, 2, 5, 1}, false, websocket.StatusInvalidFramePayloadData},
		{"trailing bytes", append(AppendSync(nil, SyncStep1, []byte{0}), 0), false, websocket.StatusInvalidFramePayloadData},
		{"malformed update", AppendSync(nil, SyncUpdate, []byte{1, 2, 3}), false, websocket.StatusInvalidFramePayloadData},
		{"awareness not JSON", AppendAwareness(nil, AppendAwarenessUpdate(nil, []AwarenessEntry{{ClientID: 1, Clock: 1, State: []byte("{")}})), false, websocket.StatusInvalidFramePayloadData},
		{"too large", AppendSync(nil, SyncUpdate, make([]byte, 2000)), false, websocket.StatusMessageTooBig},
	} {
		c := e.dial("writer")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if tc.text {
			c.ws.Write(ctx, websocket.MessageText, []byte("hello"))
		} else {
			c.ws.Write(ctx, websocket.MessageBinary, tc.msg)
		}
		cancel()
		if code := c.waitClosed(); code != tc.want {
			t.Errorf("%s: close %d, want %d", tc.name, code, tc.want)
		}
	}
	// The node still serves.
	ok := e.dial("writer")
	ok.sync()
}

// A client that does not read is dropped once its send queue is full, and a new
// connection resyncs everything.
func TestSlowClient_DroppedBeyondItsQueue(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.SendQueueMessages, o.SendQueueBytes = 8, 1<<20
		o.Limits.BytesPerSecond = 64 << 20 // the writer's 13 MiB at once are not what this test is about
	})
	w := e.dial("writer")
	w.sync()
	// A raw socket that never reads.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	slow, _, err := websocket.Dial(ctx, e.url(e.ns, "writer"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.CloseNow()
	big := strings.Repeat("x", 64<<10)
	for i := range 400 { // 25 MiB: more than the socket buffers take
		w.insert(0, big[:1024*(1+i%64)])
	}
	deadline := time.Now().Add(20 * time.Second)
	for e.metric("nomicore_client_disconnects_total", "reason", "slow-client") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the client that does not read was not dropped")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The dropped socket ends (after what was already in its buffers).
	slow.SetReadLimit(64 << 20)
	rctx, rcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer rcancel()
	for {
		if _, _, err := slow.Read(rctx); err != nil {
			if rctx.Err() != nil {
				t.Fatal("the dropped socket is still open")
			}
			break
		}
	}
	late := e.dial("writer")
	late.sync()
	late.waitText(e.docText())
}

func TestShutdown_ClosesWithGoingAway(t *testing.T) {
	e := newEnv(t, nil)
	a := e.dial("writer")
	a.sync()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if code := a.waitClosed(); code != websocket.StatusGoingAway {
		t.Fatalf("close %d, want 1001", code)
	}
	if status, _ := e.status(e.ns, "writer", nil); status != 503 {
		t.Fatalf("after shutdown: %d", status)
	}
}

// The codec's encoders are what y-protocols writes (hand-assembled bytes).
func TestCodec_Bytes(t *testing.T) {
	if got := AppendSync(nil, SyncStep1, []byte{0}); !bytes.Equal(got, []byte{0, 0, 1, 0}) {
		t.Errorf("SyncStep1 %v", got)
	}
	if got := AppendPermissionDenied(nil, "no"); !bytes.Equal(got, []byte{2, 0, 2, 'n', 'o'}) {
		t.Errorf("PermissionDenied %v", got)
	}
	aw := AppendAwarenessUpdate(nil, []AwarenessEntry{{ClientID: 300, Clock: 1, State: []byte("null")}})
	if !bytes.Equal(aw, []byte{1, 0xac, 0x02, 1, 4, 'n', 'u', 'l', 'l'}) {
		t.Errorf("awareness %v", aw)
	}
	e := lib0.NewEncoder(8)
	e.WriteVarUint(TypeQueryAwareness)
	if m, err := DecodeMessage(e.Bytes()); err != nil || m.Type != TypeQueryAwareness {
		t.Errorf("queryAwareness: %v %v", m, err)
	}
}

var _ = registry.ErrNotFound

// Without client authentication (--client-auth none, loopback only) every editor may
// connect and write; browser pages from another origin are refused unless allowed.
func TestNoAuth_AndOrigins(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Clients = nil })
	c := e.dial("")
	c.sync()
	c.insert(0, "anonymous")
	deadline := time.Now().Add(10 * time.Second)
	for e.docText() != "anonymous" {
		if time.Now().After(deadline) {
			t.Fatalf("text %q", e.docText())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if status, _ := e.status(e.ns, "", http.Header{"Origin": {"http://elsewhere.example"}}); status != http.StatusForbidden {
		t.Fatalf("a page from another origin: %d, want 403", status)
	}
	open := newEnv(t, func(o *Options) { o.Clients = nil; o.OriginPatterns = []string{"elsewhere.example"} })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, open.url(open.ns, ""), &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"http://elsewhere.example"}}})
	if err != nil {
		t.Fatalf("an allowed origin was refused: %v", err)
	}
	ws.Close(websocket.StatusNormalClosure, "")
}
