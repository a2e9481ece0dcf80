package adminapi

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/node/timeline"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/ws"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// clockedEnv is an env whose registry, API and timeline read one fake clock.
func clockedEnv(t *testing.T, opts Options) (*env, *clock.Fake, *timeline.Timeline) {
	t.Helper()
	clk := clock.NewFake(t0)
	st, err := persistence.NewMemoryStore(persistence.Options{Compactor: registry.Compactor()})
	if err != nil {
		t.Fatal(err)
	}
	role := registry.RoleHub
	if opts.Side == observer.SidePeer {
		role = registry.RolePeer
	}
	reg, err := registry.New(registry.Config{Role: role, Catalog: st, Documents: st, Clock: clk, StageClock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		reg.Close(context.Background())
		st.Close(context.Background())
	})
	tl := timeline.New(timeline.Options{Clock: clk})
	opts.Registry, opts.Store, opts.Clock, opts.Timeline = reg, st, clk, tl
	if opts.StartedAt.IsZero() {
		opts.StartedAt = t0
	}
	return newEnv(t, opts), clk, tl
}

// fakeSessions are a hub namespace layer's sessions, settable by the test.
type fakeSessions struct {
	mu   sync.Mutex
	byNS map[string][]namespace.HubSession
}

func (f *fakeSessions) get(ns string) []namespace.HubSession {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]namespace.HubSession(nil), f.byNS[ns]...)
}

func TestHubStatus(t *testing.T) {
	sessions := &fakeSessions{byNS: map[string][]namespace.HubSession{}}
	conns := []ws.ConnStatus{{PeerInstanceID: "peer-b", ConnectionID: "cb", State: observer.ConnReady, ReadyAt: t0.Add(time.Second),
		QueuedBytes: 300, InFlight: 4, PingRTT: 1500 * time.Microsecond},
		{PeerInstanceID: "peer-a", ConnectionID: "ca", State: observer.ConnReady}}
	e, clk, tl := clockedEnv(t, Options{Side: observer.SideHub, InstanceID: "hub-1", Version: "v9",
		Listeners:   map[string]string{"admin": "127.0.0.1:1", "replication": "127.0.0.1:2"},
		Sessions:    sessions.get,
		Connections: func() []ws.ConnStatus { return conns },
		Flows: func(_ context.Context, ns string) []ws.Flow {
			return []ws.Flow{{PeerInstanceID: "peer-a", ConnectionID: "ca", UpdatesSent: 7, UpdatesAcked: 5, InFlight: 2, QueuedUpdates: 1, QueuedBytes: 30}}
		},
		Load: func() ws.Load { return ws.Load{QueuedBytes: 12, InFlight: 3} }})

	// No namespace, no connection yet: the lists are there, empty.
	status, b := e.do("GET", "/v1/status", nil)
	if status != 200 {
		t.Fatalf("status %d %s", status, b)
	}
	for _, want := range []string{`"side":"hub"`, `"instanceId":"hub-1"`, `"version":"v9"`, `"ready":true`, `"persistence":"healthy"`,
		`"namespaces":[]`, `"namespacesTotal":0`, `"startedAt":"2026-12-01T09:00:00Z"`, `"listeners":{"admin":"127.0.0.1:1","replication":"127.0.0.1:2"}`,
		`"load":{"queuedBytes":12,"inFlightUpdates":3}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("status lacks %s: %s", want, b)
		}
	}
	if strings.Contains(string(b), `"hub":`) {
		t.Errorf("a hub's status has a hub link: %s", b)
	}

	// A connection that became ready, a namespace written to, a peer live on it.
	tl.Observe(observer.Event{Side: observer.SideHub, Payload: observer.ConnectionStateChanged{ConnectionID: observer.Some("ca"),
		From: observer.ConnHandshaking, To: observer.ConnReady}})
	c := e.create()
	c2 := e.create()
	path := "/v1/namespaces/" + c.NamespaceID
	clk.Advance(90 * time.Second)
	_, state := e.do("GET", path+"/update", nil)
	if st, b := e.do("POST", path+"/update", mapUpdate(t, state, "notes", map[string]any{"k": "v"})); st != 204 {
		t.Fatalf("write %d %s", st, b)
	}
	sessions.mu.Lock()
	sessions.byNS[c.NamespaceID] = []namespace.HubSession{{PeerInstanceID: "peer-a", ConnectionID: "ca", State: observer.ChannelLive},
		{PeerInstanceID: "peer-b", ConnectionID: "cb", State: observer.ChannelConflicted}}
	sessions.mu.Unlock()
	tl.Observe(observer.Event{Side: observer.SideHub, Payload: observer.UpdateSent{NamespaceID: c.NamespaceID, Bytes: 40, Sequence: 1}})

	var got NodeStatus
	// The document's size is measured in its sequencer after the first look.
	eventually(t, "the document's size", func() bool {
		_, b = e.do("GET", "/v1/status", nil)
		got = decode[NodeStatus](t, b)
		return len(got.Namespaces) == 2 && got.Namespaces[0].DocumentBytes != nil
	})
	if *got.UptimeSeconds != 90 || got.Totals == nil || got.Totals.BytesSent != 40 {
		t.Fatalf("uptime or totals: %s", b)
	}
	if len(got.Connections) != 2 || got.Connections[0].PeerInstanceID != "peer-a" {
		t.Fatalf("connections (sorted by peer): %+v", got.Connections)
	}
	ca := got.Connections[0]
	if ca.ConnectedSince == nil || !ca.ConnectedSince.Equal(t0) || ca.Namespaces != 1 || ca.LiveNamespaces != 1 {
		t.Fatalf("connection ca: %+v", ca)
	}
	if ca.PingRTTMs != nil || ca.QueuedBytes != 0 {
		t.Fatalf("connection ca has figures it was not given: %+v", ca)
	}
	// cb: what the connection layer says (its ready time rather than the timeline's).
	if cb := got.Connections[1]; cb.ConnectedSince == nil || !cb.ConnectedSince.Equal(t0.Add(time.Second)) || cb.Namespaces != 1 ||
		cb.LiveNamespaces != 0 || cb.QueuedBytes != 300 || cb.InFlightUpdates != 4 || cb.PingRTTMs == nil || *cb.PingRTTMs != 1.5 {
		t.Fatalf("connection cb: %+v", cb)
	}
	ns := got.Namespaces[0]
	if ns.NamespaceID != c.NamespaceID && ns.NamespaceID != c2.NamespaceID {
		t.Fatalf("namespace %+v", ns)
	}
	for _, n := range got.Namespaces {
		if n.NamespaceID != c.NamespaceID {
			continue
		}
		if !n.Loaded || n.Writes == 0 || n.LastWriteAt == nil || !n.LastWriteAt.Equal(t0.Add(90*time.Second)) ||
			n.ReplicationEpoch != c.ReplicationEpoch || n.Peers["live"] != 1 || n.Peers["conflicted"] != 1 || n.Owner != "default" {
			t.Fatalf("written namespace: %+v", n)
		}
		_, upd := e.do("GET", path+"/update", nil)
		if n.DocumentBytes == nil || *n.DocumentBytes != len(upd) {
			t.Fatalf("documentBytes %v, the state has %d", n.DocumentBytes, len(upd))
		}
	}
	if got.NamespacesTotal != 2 {
		t.Fatalf("namespacesTotal %d", got.NamespacesTotal)
	}

	// ?namespaces=1 lists one of the two; the total stays.
	_, b = e.do("GET", "/v1/status?namespaces=1", nil)
	if got := decode[NodeStatus](t, b); len(got.Namespaces) != 1 || got.NamespacesTotal != 2 {
		t.Fatalf("limited: %s", b)
	}
	e.wantError("GET", "/v1/status?namespaces=0", nil, 400, CodeBadRequest)

	// GET /v1/connections is the same list; the namespace status names each session's
	// connection.
	_, b = e.do("GET", "/v1/connections", nil)
	if list := decode[[]ConnectionStatus](t, b); len(list) != 2 || list[0].ConnectionID != "ca" || list[0].LiveNamespaces != 1 {
		t.Fatalf("connections: %s", b)
	}
	_, b = e.do("GET", path, nil)
	st := decode[Status](t, b)
	if len(st.Sessions) != 2 || st.Sessions[0].ConnectionID != "ca" || st.Writes == nil || *st.Writes == 0 || st.DocumentBytes == nil || st.LastWriteAt == nil {
		t.Fatalf("namespace status: %s", b)
	}
	// Each session with what its connection knows of the namespace's updates (ca), or
	// nothing (cb, which did not answer).
	if sa := st.Sessions[0]; sa.UpdatesSent == nil || *sa.UpdatesSent != 7 || *sa.UpdatesAcked != 5 || *sa.InFlightUpdates != 2 ||
		*sa.QueuedUpdates != 1 || *sa.QueuedBytes != 30 {
		t.Fatalf("session on ca: %s", b)
	}
	if sb := st.Sessions[1]; sb.UpdatesSent != nil || sb.InFlightUpdates != nil {
		t.Fatalf("session on cb: %s", b)
	}
}

// The namespaces of GET /v1/status come in pages (?namespaces=N&offset=K) that together list
// each namespace once, in order, and ?match= selects those whose id or owner contains a
// text, in any case; the totals say how many there are and how many match.
func TestStatusPagesAndSearch(t *testing.T) {
	e, _, _ := clockedEnv(t, Options{Side: observer.SideHub})
	var ids []string
	for range 7 {
		ids = append(ids, e.create().NamespaceID)
	}
	status, b := e.do("POST", "/v1/namespaces", []byte(`{"owner":"Alice"}`))
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, b)
	}
	alice := decode[Created](t, b).NamespaceID
	ids = append(ids, alice)
	slices.Sort(ids) // none is loaded: the order is by id
	page := func(q string) NodeStatus {
		t.Helper()
		status, b := e.do("GET", "/v1/status?"+q, nil)
		if status != 200 {
			t.Fatalf("%s: %d %s", q, status, b)
		}
		return decode[NodeStatus](t, b)
	}
	var listed []string
	for offset := 0; offset < 10; offset += 3 {
		st := page("namespaces=3&offset=" + strconv.Itoa(offset))
		if st.NamespacesTotal != 8 || st.NamespacesMatched != 8 || st.NamespacesOffset != offset || len(st.Namespaces) != min(3, max(0, 8-offset)) {
			t.Fatalf("offset %d: total %d, matched %d, offset %d, %d listed", offset, st.NamespacesTotal, st.NamespacesMatched, st.NamespacesOffset, len(st.Namespaces))
		}
		for _, n := range st.Namespaces {
			listed = append(listed, n.NamespaceID)
		}
	}
	if !slices.Equal(listed, ids) {
		t.Fatalf("the pages listed %v, want %v", listed, ids)
	}
	var defaults []string // the namespaces of owner default, in order
	for _, id := range ids {
		if id != alice {
			defaults = append(defaults, id)
		}
	}
	for _, tc := range []struct {
		query   string
		want    []string
		matched int
	}{
		{"match=alice", []string{alice}, 1}, // the owner, in any case
		{"match=" + strings.ToUpper(ids[2][3:20]), []string{ids[2]}, 1},
		{"match=" + url.QueryEscape(" "+ids[5][3:]+" "), []string{ids[5]}, 1}, // blanks around it do not count
		{"match=default&namespaces=2&offset=6", defaults[6:], 7},
		{"match=no-such-thing", nil, 0},
	} {
		st := page(tc.query)
		var got []string
		for _, n := range st.Namespaces {
			got = append(got, n.NamespaceID)
		}
		if !slices.Equal(got, tc.want) || st.NamespacesMatched != tc.matched || st.NamespacesTotal != 8 {
			t.Errorf("%s: listed %v (matched %d of %d), want %v (matched %d)", tc.query, got, st.NamespacesMatched, st.NamespacesTotal, tc.want, tc.matched)
		}
	}
	e.wantError("GET", "/v1/status?offset=-1", nil, 400, CodeBadRequest)
	e.wantError("GET", "/v1/status?match="+strings.Repeat("x", MaxStatusMatch+1), nil, 400, CodeBadRequest)
	e.wantError("GET", "/v1/status/stream?offset=x", nil, 400, CodeBadRequest)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPeerStatus(t *testing.T) {
	const nsLive, nsBoot, nsFailed = "ns-11111111111111111111111111111111", "ns-22222222222222222222222222222222", "ns-33333333333333333333333333333333"
	targets := &fakeTargets{list: map[string]namespace.TargetStatus{
		nsLive: {Target: namespace.Target{NamespaceID: nsLive, Owner: "default"}, State: observer.ChannelLive},
		nsBoot: {Target: namespace.Target{NamespaceID: nsBoot, Owner: "default"}, State: observer.ChannelBootstrapping,
			Progress: &namespace.TransferProgress{Kind: protocol.KindSnapshot, BytesReceived: 300, TotalBytes: 1000}},
		nsFailed: {Target: namespace.Target{NamespaceID: nsFailed, Owner: "default"}, State: observer.ChannelFailed},
	}}
	var link LinkInfo
	var mu sync.Mutex
	e, clk, tl := clockedEnv(t, Options{Side: observer.SidePeer, Targets: targets,
		Link: func() LinkInfo { mu.Lock(); defer mu.Unlock(); return link },
		ExplainTarget: func(ts namespace.TargetStatus) (string, string) {
			if ts.State == observer.ChannelFailed {
				return "NAMESPACE_NOT_FOUND", "create it on the hub"
			}
			return "", ""
		},
		Editors: func(ns string) (int, bool) { return 2, ns == nsLive },
	})
	peer := func(p observer.Payload) { tl.Observe(observer.Event{Side: observer.SidePeer, Payload: p}) }
	peer(observer.ConnectionStateChanged{From: observer.ConnConnecting, To: observer.ConnBackoff})
	peer(observer.ConnectionBackoffScheduled{Attempt: 2, DelayMs: 1500, Reason: observer.BackoffDialFailed})
	mu.Lock()
	link = LinkInfo{HubURL: "ws://127.0.0.1:9/v1/replication", State: observer.ConnBackoff, Problem: "cannot reach the hub"}
	mu.Unlock()

	_, b := e.do("GET", "/v1/status", nil)
	got := decode[NodeStatus](t, b)
	h := got.Hub
	if h == nil || h.State != "backoff" || h.URL != link.HubURL || h.Problem != "cannot reach the hub" || h.Backoff == nil ||
		h.Backoff.Attempt != 2 || h.Backoff.DelayMs != 1500 || !h.Backoff.RetryAt.Equal(t0.Add(1500*time.Millisecond)) || h.Since == nil {
		t.Fatalf("hub link: %s", b)
	}
	if strings.Contains(string(b), `"connections"`) {
		t.Fatalf("a peer's status lists hub connections: %s", b)
	}
	byID := map[string]NamespaceSummary{}
	for _, n := range got.Namespaces {
		byID[n.NamespaceID] = n
	}
	if n := byID[nsBoot]; n.State != "bootstrapping" || n.Progress == nil || *n.Progress != (ProgressJSON{BytesReceived: 300, TotalBytes: 1000, Kind: "snapshot"}) || n.Editors != nil {
		t.Fatalf("bootstrapping target: %+v", n)
	}
	if n := byID[nsLive]; n.State != "live" || n.Progress != nil || n.Editors == nil || *n.Editors != 2 {
		t.Fatalf("live target: %+v", n)
	}
	if n := byID[nsFailed]; n.Code != "NAMESPACE_NOT_FOUND" || n.Reason != "create it on the hub" {
		t.Fatalf("failed target: %+v", n)
	}
	if got.NamespacesTotal != 3 {
		t.Fatalf("total %d", got.NamespacesTotal)
	}

	// Ready again: the backoff goes, since is the new state's.
	clk.Advance(2 * time.Second)
	peer(observer.ConnectionStateChanged{From: observer.ConnHandshaking, To: observer.ConnReady})
	mu.Lock()
	link = LinkInfo{HubURL: link.HubURL, State: observer.ConnReady, PingRTT: 2 * time.Millisecond}
	mu.Unlock()
	_, b = e.do("GET", "/v1/status", nil)
	if h := decode[NodeStatus](t, b).Hub; h.State != "ready" || h.Backoff != nil || h.Problem != "" || !h.Since.Equal(t0.Add(2*time.Second)) ||
		h.PingRTTMs == nil || *h.PingRTTMs != 2 {
		t.Fatalf("ready link: %s", b)
	}
	_, b = e.do("GET", "/v1/namespaces/"+nsBoot, nil)
	if st := decode[Status](t, b); st.Progress == nil || st.Progress.TotalBytes != 1000 {
		t.Fatalf("namespace status of a bootstrapping target: %s", b)
	}
	e.wantError("GET", "/v1/connections", nil, 404, CodeNotFound)
}

func TestEventsRoute(t *testing.T) {
	e, _, tl := clockedEnv(t, Options{Side: observer.SideHub})
	const nsA, nsB = "ns-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "ns-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	for _, ns := range []string{nsA, nsB, nsA} {
		tl.Observe(observer.Event{Side: observer.SideHub, Payload: observer.ChannelStateChanged{NamespaceID: ns,
			From: observer.ChannelOpening, To: observer.ChannelLive}})
	}
	_, b := e.do("GET", "/v1/events?namespace="+nsA, nil)
	var page struct {
		Events []struct {
			Seq   uint64
			Event map[string]any
		}
		Next uint64
	}
	if err := json.Unmarshal(b, &page); err != nil || len(page.Events) != 2 || page.Events[1].Seq != 3 || page.Next != 3 ||
		page.Events[0].Event["namespaceId"] != nsA || page.Events[0].Event["type"] != "channel-state-changed" {
		t.Fatalf("events of A: %s", b)
	}
	_, b = e.do("GET", "/v1/events?after=1&limit=1", nil)
	if err := json.Unmarshal(b, &page); err != nil || len(page.Events) != 1 || page.Events[0].Seq != 2 || page.Next != 2 {
		t.Fatalf("page after 1: %s", b)
	}
	e.wantError("GET", "/v1/events?namespace=nope", nil, 400, CodeBadRequest)
	e.wantError("GET", "/v1/events?after=x", nil, 400, CodeBadRequest)
}

// jsonSSE reads Server-Sent Events whose data is JSON.
type jsonSSE struct{ r *bufio.Reader }

type jsonEvent struct {
	name, id string
	data     string
}

func (s *jsonSSE) next(t *testing.T) jsonEvent {
	t.Helper()
	var ev jsonEvent
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if ev.name != "" {
				return ev
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			ev.name = line[len("event: "):]
		case strings.HasPrefix(line, "id: "):
			ev.id = line[len("id: "):]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[len("data: "):]
		}
	}
}

func TestStatusStream(t *testing.T) {
	e, clk, tl := clockedEnv(t, Options{Side: observer.SideHub, Token: "s3cret"})
	c := e.create()
	channel := func(ns string) {
		tl.Observe(observer.Event{Side: observer.SideHub, Payload: observer.ChannelStateChanged{NamespaceID: ns,
			From: observer.ChannelOpening, To: observer.ChannelLive}})
	}
	other := "ns-cccccccccccccccccccccccccccccccc"
	channel(c.NamespaceID) // 1: the backlog
	channel(other)         // 2: another namespace's

	// The stream needs the token like every data route.
	if resp, err := http.Get(e.srv.URL + "/v1/status/stream"); err != nil || resp.StatusCode != 401 {
		t.Fatalf("stream without the token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	e.wantError("GET", "/v1/status/stream?namespace=ns-dddddddddddddddddddddddddddddddd", nil, 404, CodeNamespaceNotFound)
	e.wantError("GET", "/v1/status/stream?interval=0", nil, 400, CodeBadRequest)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/status/stream?namespace="+c.NamespaceID+"&interval=1000", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &jsonSSE{bufio.NewReader(resp.Body)}
	ev := s.next(t)
	if ev.name != "status" || !strings.Contains(ev.data, `"namespacesTotal":1`) {
		t.Fatalf("first event %+v", ev)
	}
	ev = s.next(t)
	if ev.name != "namespace" || !strings.Contains(ev.data, `"namespaceId":"`+c.NamespaceID+`"`) {
		t.Fatalf("second event %+v", ev)
	}
	ev = s.next(t)
	if ev.name != "event" || ev.id != "1" || !strings.Contains(ev.data, `"seq":1`) {
		t.Fatalf("backlog event %+v", ev)
	}
	// Live: another namespace's event is filtered out, this one's comes at once.
	channel(other)
	channel(c.NamespaceID)
	ev = s.next(t)
	if ev.name != "event" || ev.id != "4" {
		t.Fatalf("live event %+v", ev)
	}
	// The next status comes with the clock.
	if !clk.WaitForTimers(1, 5*time.Second) {
		t.Fatal("the stream armed no ticker")
	}
	clk.Advance(time.Second)
	if ev = s.next(t); ev.name != "status" || !strings.Contains(ev.data, `"uptimeSeconds":1`) {
		t.Fatalf("ticked event %+v", ev)
	}
	if ev = s.next(t); ev.name != "namespace" {
		t.Fatalf("ticked namespace event %+v", ev)
	}
	// Shutdown ends it.
	e.api.Close()
	if ev = s.next(t); ev.name != "closed" {
		t.Fatalf("at close %+v", ev)
	}
}

// A stream that resumes after an event no longer kept is told how many it missed.
func TestStatusStreamResumeAndMissed(t *testing.T) {
	clk := clock.NewFake(t0)
	tl := timeline.New(timeline.Options{Clock: clk, MaxEvents: 2})
	e := newEnv(t, Options{Side: observer.SideHub, Timeline: tl, Clock: clk})
	for range 5 {
		tl.Observe(observer.Event{Side: observer.SideHub, Payload: observer.ChannelStateChanged{NamespaceID: "ns-cccccccccccccccccccccccccccccccc",
			From: observer.ChannelOpening, To: observer.ChannelLive}})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/status/stream?after=1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	s := &jsonSSE{bufio.NewReader(resp.Body)}
	if ev := s.next(t); ev.name != "status" {
		t.Fatalf("first %+v", ev)
	}
	if ev := s.next(t); ev.name != "missed" || ev.data != `{"missed":2}` {
		t.Fatalf("missed %+v", ev)
	}
	for _, want := range []string{"4", "5"} {
		if ev := s.next(t); ev.name != "event" || ev.id != want {
			t.Fatalf("event %+v, want id %s", ev, want)
		}
	}
}

func TestDashboardIsPublicDataIsNot(t *testing.T) {
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<!doctype html>page " + r.URL.Path))
	})
	e := newEnv(t, Options{Side: observer.SideHub, Token: "tok", UI: ui})
	noToken := func(path string) (int, string) {
		resp, err := http.Get(e.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var sb strings.Builder
		bufio.NewReader(resp.Body).WriteTo(&sb)
		return resp.StatusCode, sb.String()
	}
	if st, body := noToken("/"); st != 200 || body != "<!doctype html>page /" {
		t.Fatalf("GET / = %d %q", st, body)
	}
	if st, body := noToken("/ui/app.js"); st != 200 || body != "<!doctype html>page /ui/app.js" {
		t.Fatalf("GET /ui/app.js = %d %q", st, body)
	}
	for _, p := range []string{"/v1/status", "/v1/events", "/v1/connections", "/v1/status/stream", "/other"} {
		if st, body := noToken(p); st != 401 {
			t.Errorf("GET %s without the token = %d %s", p, st, body)
		}
	}
	// Without a UI, / is an unknown route as before.
	e2 := newEnv(t, Options{Side: observer.SideHub})
	e2.wantError("GET", "/", nil, 404, CodeNotFound)
	e2.wantError("GET", "/ui/app.js", nil, 404, CodeNotFound)
}

func TestBrowserRequestsFromElsewhereAreRefused(t *testing.T) {
	e := newEnv(t, Options{Side: observer.SideHub})
	send := func(method, path string, h map[string]string, host string) (int, string) {
		req, _ := http.NewRequest(method, e.srv.URL+path, nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var er struct{ Code string }
		json.NewDecoder(resp.Body).Decode(&er)
		return resp.StatusCode, er.Code
	}
	if st, code := send("POST", "/v1/namespaces", map[string]string{"Origin": "http://evil.example"}, ""); st != 403 || code != CodeCrossOrigin {
		t.Errorf("POST from another origin: %d %s", st, code)
	}
	if st, code := send("POST", "/v1/namespaces", map[string]string{"Sec-Fetch-Site": "cross-site"}, ""); st != 403 || code != CodeCrossOrigin {
		t.Errorf("POST sent cross-site: %d %s", st, code)
	}
	if st, code := send("POST", "/v1/namespaces", map[string]string{"Sec-Fetch-Site": "same-site"}, ""); st != 403 || code != CodeCrossOrigin {
		t.Errorf("POST from another port of the same host: %d %s", st, code)
	}
	origin := e.srv.URL
	if st, code := send("POST", "/v1/namespaces", map[string]string{"Origin": origin, "Sec-Fetch-Site": "same-origin"}, ""); st != 201 {
		t.Errorf("POST from the dashboard's own origin: %d %s", st, code)
	}
	if st, _ := send("POST", "/v1/namespaces", nil, ""); st != 201 {
		t.Errorf("POST without browser headers (curl): %d", st)
	}
	// A name that is not loopback: refused without a token (DNS rebinding), for reads too.
	if st, code := send("GET", "/v1/status", nil, "rebound.example:8788"); st != 403 || code != CodeHostNotAllowed {
		t.Errorf("GET with a foreign Host: %d %s", st, code)
	}
	for _, host := range []string{"localhost:8788", "127.0.0.2:1", "[::1]:8788", "LOCALHOST"} {
		if st, _ := send("GET", "/healthz", nil, host); st != 200 {
			t.Errorf("GET with Host %s: %d", host, st)
		}
	}
	// With a token, any name may reach it (the API may listen beyond loopback).
	et := newEnv(t, Options{Side: observer.SideHub, Token: "tok"})
	req, _ := http.NewRequest("GET", et.srv.URL+"/v1/status", nil)
	req.Host = "nomicore.internal:8788"
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET with a token and another name: %d", resp.StatusCode)
	}
}

func TestRootsAndDocLimit(t *testing.T) {
	e := newEnv(t, Options{Side: observer.SideHub})
	c := e.create()
	path := "/v1/namespaces/" + c.NamespaceID
	_, state := e.do("GET", path+"/update", nil)
	big := strings.Repeat("x", 2000)
	if st, b := e.do("POST", path+"/update", mapUpdate(t, state, "notes", map[string]any{"a": "b", "big": big})); st != 204 {
		t.Fatalf("write %d %s", st, b)
	}
	_, b := e.do("GET", path+"/roots", nil)
	roots := decode[[]RootJSON](t, b)
	if len(roots) != 2 || roots[0].Name != "meta" || roots[0].Type != "map" || roots[1].Name != "notes" || roots[1].Type != "map" || roots[1].JSONBytes < 2000 {
		t.Fatalf("roots %s", b)
	}
	if st, b := e.do("GET", path+"/doc?root=notes:map&maxBytes=100000", nil); st != 200 || !strings.Contains(string(b), big) {
		t.Fatalf("doc within the limit: %d %.80s", st, b)
	}
	e.wantError("GET", path+"/doc?root=notes:map&maxBytes=1000", nil, 413, CodeDocumentTooLarge)
	e.wantError("GET", path+"/doc?maxBytes=1000", nil, 413, CodeDocumentTooLarge)
	e.wantError("GET", path+"/doc?maxBytes=-1", nil, 400, CodeBadRequest)
	e.wantError("GET", "/v1/namespaces/ns-dddddddddddddddddddddddddddddddd/roots", nil, 404, CodeNamespaceNotFound)
}

// TestNamespaceLogOfAClusterNode: on a hub cluster node, GET /v1/namespaces/{id} says how far
// behind the namespace's log the node is; a single hub (no Log) and a namespace the node
// does not follow say nothing of it.
func TestNamespaceLogOfAClusterNode(t *testing.T) {
	var followed string
	e := newEnv(t, Options{Side: observer.SideHub, Log: func(ns string) (LogJSON, bool) {
		return LogJSON{LagRecords: 7, Compacting: true}, ns == followed
	}})
	a, b := e.create(), e.create()
	followed = a.NamespaceID
	_, body := e.do("GET", "/v1/namespaces/"+a.NamespaceID, nil)
	if st := decode[Status](t, body); st.Log == nil || *st.Log != (LogJSON{LagRecords: 7, Compacting: true}) {
		t.Fatalf("followed namespace: %s", body)
	}
	if !strings.Contains(string(body), `"log":{"lagRecords":7,"compacting":true}`) {
		t.Fatalf("log JSON: %s", body)
	}
	if _, body := e.do("GET", "/v1/namespaces/"+b.NamespaceID, nil); strings.Contains(string(body), `"log"`) {
		t.Fatalf("a namespace the node does not follow: %s", body)
	}
	single := newEnv(t, Options{Side: observer.SideHub})
	c := single.create()
	if _, body := single.do("GET", "/v1/namespaces/"+c.NamespaceID, nil); strings.Contains(string(body), `"log"`) {
		t.Fatalf("a single hub: %s", body)
	}
}
